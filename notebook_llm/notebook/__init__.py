"""The notebook layer: the IPython magics, the widgets that show a turn live and then as one
static output, the batch progress bar, and the one check of whether a person is watching.

The only layer that imports IPython, ipywidgets or anywidget. It consumes engine events; nothing
below imports it.
"""
