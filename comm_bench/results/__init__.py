"""The results document: one self-describing JSON file per run.

    document.py       writing it as the run goes, finishing it, reading and checking it
    stream.py         records streamed to a JSON Lines file beside the document (large runs)
    stream_read.py    a large document read record by record, every record checked (readers)
    records.py        records as the readers see them (pairs, rates, latencies)
    record_checks.py  every figure a record carries, checked before use
    doclimits.py      what a JSON or YAML document may hold
    safefile.py       files written and read on a user's behalf (as root, in shared folders)
    export.py         records out of comm-bench (CSV, JSON Lines, Prometheus)
    data_error.py     wrong data found by the check, as a document records it

May import the vocabulary at the top of comm_bench and control/secret.py (to keep the
run's secret out of every document). Read by views/, validate/ and select/; written by run/.
"""
