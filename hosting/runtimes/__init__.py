"""Launch backends: the contract each keeps (base.py), and each backend beside its handle."""
