"""The Python API over the engine: :mod:`.chat` (conversations), :mod:`.batch` (``map`` over
prompts and DataFrames), :mod:`.tool_calling` (Python functions as tools and the tool loop),
cost estimates and caps, record/replay.

No widgets and no IPython here: a caller that shows a turn passes an observer in
(:mod:`.turn_runner`); the notebook layer is one such caller.
"""
