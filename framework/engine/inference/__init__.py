"""A model on images: upscale.py (tiles, alpha, outscale, 16-bit, the captured inference graphs),
autotile.py (--tile auto from a memory budget), tta.py (the x8 self-ensemble), video.py (PyAV),
loading.py (which model a weights file is), zoo.py (the one place that imports models/)."""
