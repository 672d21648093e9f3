"""Transports, one file each; installed as comm_bench.transports (see registry)."""
if __package__ != "comm_bench.transports":
    raise ImportError("import comm_bench.transports, not the source folder 'transports' "
                      "(install the package: pip install -e .)")
