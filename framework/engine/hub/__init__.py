"""What srgrad fetches by name, every file checked by sha256 before use: models.py (published
models for -n, -dn, --list-models, and the pretrained files of LPIPS and DISTS), datasets.py
(Set5 ... DIV2K: archives, safe extraction, the data folder)."""
