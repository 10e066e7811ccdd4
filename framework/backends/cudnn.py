"""torch.backends.cudnn's switches (`benchmark`, `deterministic`, `enabled`, `allow_tf32`):
plain module attributes that scripts may set and read back; srgrad has no cuDNN, so they change
nothing (its CPU kernels are deterministic)."""
benchmark = False
deterministic = False
enabled = True
allow_tf32 = True


def is_available() -> bool:
    """False: no cuDNN on srgrad's CPU-only backend."""
    return False


def version():
    return None
