"""File input/output of data: images (Pillow, plus our own 16-bit PNG codec), YAML configs
(config.py) and atomic writes (atomic.py). Weights formats live in framework/weights/."""
from .image import image_size, list_images, read_image, supports_16bit, write_image

__all__ = ["image_size", "list_images", "read_image", "supports_16bit", "write_image"]
