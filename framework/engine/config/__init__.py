"""What a config holds and where it comes from: schema.py and fields.py (the keys, their defaults
and checks; each recipe's keys merged in), overrides.py (--set), options.py (which trainer an
option file is) with basicsr_options.py, basicsr_test_options.py, redux_options.py and
redux_archs.py (BasicSR's and traiNNer-redux's files translated), testconfig.py (srgrad-eval's
test sets), preflight.py (what srgrad-train checks and fetches before it starts)."""
