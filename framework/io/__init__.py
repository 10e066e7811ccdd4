"""File input/output: images (Pillow)."""
from .image import list_images, read_image, write_image

__all__ = ["list_images", "read_image", "write_image"]
