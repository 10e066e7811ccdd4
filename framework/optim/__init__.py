"""(placeholder: optimizers and schedulers being written)"""
