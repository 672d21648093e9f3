"""The control plane: how the ranks of a run meet and watch each other.

    store_server.py   rank 0's store: one event loop, connections admitted by the run's secret
    store_wire.py     its wire format (frames, fields, values, the admission proof)
    light_store.py    the client every rank holds
    rendezvous.py     Store: sealed values, gathers and barriers over either store
    agent_store.py    where the store lives when an agent (torchrun) starts the ranks
    join.py           the first meeting: every rank's arrival, the run's nonce
    watchdog.py       heartbeats: a rank that dies or hangs is named within --timeout
    secret.py         the run's secret (a file, a variable or derived), never in a document
    fd_limit.py       descriptors: the soft limit raised to the hard one, or one clear line
    world_size.py     the world size each rank was told, checked against the others'

May import: the shared vocabulary at the top of comm_bench (errors) and system/.
Never imports results/, run/, views/ or validate/: everything that runs leans on it.
"""
