"""The kinds of an op's argument in a captured graph (_graph.py's lists, _lower.py's and _planes.py's
rewrites): a slot (an intermediate or the input), a live tensor read at each call (a parameter, in a
training graph), a fixed array (a constant)."""
_SLOT, _LIVE, _FIXED = 0, 1, 2
