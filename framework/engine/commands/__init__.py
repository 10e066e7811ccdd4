"""The command lines, one module each (`main(argv) -> int`, exit 0 / 1 / 2 / 130): cli.py
(srgrad-train and the entry points srgrad_cli.py calls), infer.py, evaluate.py, export.py,
convert.py, degrade.py, prepare.py; args.py holds the options they share (which model, --tile,
--tta, the error contract), bf16_check.py --bf16 and its measured error, outputs.py what a command
may write. A command imports the rooms below it, never another command."""
