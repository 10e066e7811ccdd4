"""File input/output: images (Pillow)."""
from .image import image_size, list_images, read_image, write_image

__all__ = ["image_size", "list_images", "read_image", "write_image"]
