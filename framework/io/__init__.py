"""File input/output: images (Pillow, plus our own 16-bit PNG codec), TensorBoard event files."""
from .image import image_size, list_images, read_image, supports_16bit, write_image
from .tensorboard import SummaryWriter

__all__ = ["image_size", "list_images", "read_image", "supports_16bit", "write_image",
           "SummaryWriter"]
