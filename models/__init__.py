"""SR architectures, one per file, registered in framework.registry.MODELS."""
