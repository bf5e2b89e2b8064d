import io

from django.core.management.base import OutputWrapper

from core.progress import progress, track


def test_it_prints_nothing_when_silent():
    out = io.StringIO()
    with progress(total=3, desc="Scanning", silent=True, stream=out, interval=0) as bar:
        for _ in range(3):
            bar.advance()
        bar.note("hello")
    assert out.getvalue() == ""
    assert bar.count == 3


def test_it_prints_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    with progress(total=4, desc="Scanning", stream=out, interval=0) as bar:
        bar.advance(2)
        bar.advance(2)
    lines = out.getvalue().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in lines[:2]] == [
        "Scanning: 2/4 (50%)",
        "Scanning: 4/4 (100%)",
    ]
    assert lines[2].startswith("Scanning: 4/4 (100%) ")
    assert lines[2].endswith(" - finished")
    assert len(lines) == 3


def test_it_keeps_quiet_between_intervals():
    out = io.StringIO()
    with progress(total=None, desc="Indexing", stream=out, interval=3600) as bar:
        for _ in range(50):
            bar.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Indexing: 50 done ")


def test_it_draws_a_bar_on_a_terminal_and_unwraps_django_output():
    out = io.StringIO()
    wrapped = OutputWrapper(out)
    with progress(total=2, desc="Bench", stream=wrapped, force_tty=True) as bar:
        bar.advance()
        bar.advance()
    text = out.getvalue()
    assert "Bench" in text
    assert "2/2" in text
    assert "\r" in text  # redrawn in place, not one line per update


def test_track_counts_items_and_takes_total_from_len():
    out = io.StringIO()
    seen = list(track([1, 2, 3], desc="Loading", stream=out, interval=3600))
    assert seen == [1, 2, 3]
    assert out.getvalue().splitlines()[-1].startswith("Loading: 3/3 (100%) ")
