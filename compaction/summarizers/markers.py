"""Fixed strings of the summary format, shared by the writers and the readers of summaries."""

# Every summary ends with a line starting with this (the assembler shows it to the model).
EXPAND_PREFIX = "Expand for details about:"
# First line of a `fallback_summary`.
FALLBACK_MARKER = "[Deterministic fallback summary]"
# First line of a deterministic summary ("Covers 40 messages msg:1..msg:40 ...").
HEADER_PREFIX = "Covers "
