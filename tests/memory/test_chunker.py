from memory.chunker import (
    ChunkingOptions,
    Segment,
    chunk_segments,
    content_hash,
    extractive_summary,
)
from memory.models import ChunkType


def _source(segments):
    return "\n\n".join(s.text for s in segments)


def test_each_chunk_points_at_its_source_text_by_offsets():
    segments = [
        Segment("We decided to ship on Fridays. Deploys need two reviewers.", "user", 1),
        Segment("Understood: Friday deploys with two reviewers.", "assistant", 2),
    ]
    chunks = chunk_segments(segments)
    source = _source(segments)
    assert len(chunks) == 1
    chunk = chunks[0]
    assert (chunk.seq_start, chunk.seq_end) == (1, 2)
    assert (chunk.start_offset, chunk.end_offset) == (0, len(source))
    assert chunk.rendered_text == source
    assert chunk.content_hash == content_hash(source)
    assert chunk.chunk_type == ChunkType.DECISION


def test_a_tool_result_is_a_chunk_of_its_own():
    segments = [
        Segment("Please list the files.", "user", 1),
        Segment("README.md\nsetup.py\nsrc/app.py", "tool", 2, is_tool_result=True),
        Segment("There are three files.", "assistant", 3),
    ]
    chunks = chunk_segments(segments)
    assert [c.chunk_type for c in chunks] == [
        ChunkType.USER_CONTEXT,
        ChunkType.TOOL_RESULT,
        ChunkType.EXPLANATION,
    ]
    tool = chunks[1]
    assert tool.rendered_text == "README.md\nsetup.py\nsrc/app.py"
    assert _source(segments)[tool.start_offset : tool.end_offset] == tool.rendered_text


def test_a_heading_starts_a_new_chunk_once_the_current_one_is_big_enough():
    body = "Plain words about the first topic. " * 40  # ~350 tokens
    text = f"# First\n{body}\n\n# Second\nShort second section."
    chunks = chunk_segments([Segment(text, "assistant", 1)])
    assert len(chunks) == 2
    assert chunks[0].rendered_text.startswith("# First")
    assert chunks[1].rendered_text == "# Second\nShort second section."
    assert text[chunks[1].start_offset : chunks[1].end_offset] == chunks[1].rendered_text
    assert chunks[1].summary == "Second: Short second section."


def test_small_headed_sections_are_merged_up_to_the_minimum():
    text = "# A\nalpha.\n\n# B\nbeta."
    chunks = chunk_segments([Segment(text, "assistant", 1)])
    assert [c.rendered_text for c in chunks] == ["# A\nalpha.\n\n# B\nbeta."]


def test_big_code_is_cut_at_function_boundaries_and_typed_as_code():
    functions = "\n".join(
        f"def handler_{i}(request):\n"
        + "".join(f"    step_{j} = compute({j})\n" for j in range(30))
        for i in range(6)
    )
    text = f"```python\n{functions}```"
    options = ChunkingOptions(min_tokens=50, max_tokens=400, overlap_tokens=0)
    chunks = chunk_segments([Segment(text, "assistant", 1)], options=options)
    assert len(chunks) >= 3
    assert all(c.chunk_type == ChunkType.CODE for c in chunks)
    assert all(c.token_est <= 400 for c in chunks)
    for chunk in chunks[1:]:
        assert chunk.rendered_text.startswith("def handler_")
        assert text[chunk.start_offset : chunk.end_offset] == chunk.rendered_text


def test_oversized_prose_is_split_with_overlap():
    sentences = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(300))
    options = ChunkingOptions(min_tokens=100, max_tokens=300, overlap_tokens=50)
    chunks = chunk_segments([Segment(sentences, "assistant", 1)], options=options)
    assert len(chunks) >= 4
    assert all(c.token_est <= 300 for c in chunks)
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert current.start_offset < previous.end_offset  # the overlap
        overlap = sentences[current.start_offset : previous.end_offset]
        assert previous.rendered_text.endswith(overlap)


def test_without_overlap_pieces_do_not_overlap():
    sentences = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(300))
    options = ChunkingOptions(min_tokens=100, max_tokens=300, overlap_tokens=0)
    chunks = chunk_segments([Segment(sentences, "assistant", 1)], options=options)
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert current.start_offset >= previous.end_offset


def test_a_topic_shift_starts_a_new_chunk():
    segments = [
        Segment("The deploy pipeline runs on Fridays.", "user", 1),
        Segment("Bananas are rich in potassium.", "user", 2),
    ]

    def embed(texts):
        import numpy as np

        # Orthogonal vectors: every adjacent pair reads as a new topic.
        return np.eye(len(texts), dtype=np.float32)

    assert len(chunk_segments(segments)) == 1
    assert len(chunk_segments(segments, embed=embed)) == 2


def test_the_summary_is_taken_from_the_text():
    text = (
        "The cache layer stores rendered pages. The cache expires after ten minutes. "
        "Lunch was good."
    )
    summary = extractive_summary(text)
    assert summary in text
    assert "cache" in summary
    assert extractive_summary("") == ""


def test_empty_segments_make_no_chunks():
    assert chunk_segments([Segment("   ", "user", 1)]) == []
