"""One training run: trainer.py (the loop: signals, checkpoints, validation, logging), recipes/
(what one step is, registered in RECIPES), runfolder.py and runlog.py (the run folder, progress,
curves), validation.py (SR vs bicubic scoring, also srgrad-eval's), distributed.py (MPI),
tensorboard.py, precompile.py (a run's kernels compiled ahead of its first step)."""
