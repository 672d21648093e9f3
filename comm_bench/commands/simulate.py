"""`comm-bench simulate`: a SIMULATED fabric run, for tests and planning at scale."""
import click

from ..validate.confirm import DEFAULT_ALTERNATIONS
from ..schedule import COST, DEFAULT_K

_PATTERNS = ("matchings", "topology", "pairwise-concurrent")


@click.command(context_settings={"show_default": True})
@click.option("--nodes", default=1024, type=click.IntRange(2, 65536), help="Nodes (one rank each).")
@click.option("--leaf", default=32, type=click.IntRange(1), help="Nodes per leaf switch.")
@click.option("--pod", default=0, type=click.IntRange(0), help="Leaves per pod, for the topology pattern's grouping (the rate model stays two tiers; 0: no pods).")
@click.option("--host-gbs", default=50.0, type=click.FloatRange(min=0, min_open=True), help="Host link rate, GB/s each way.")
@click.option("--oversub", default=1.0, type=click.FloatRange(min=1), help="Leaf downlinks : uplinks.")
@click.option("--noise", default=0.02, type=click.FloatRange(0, 1), help="Lognormal sigma per measurement.")
@click.option("--fault", "faults", multiple=True, metavar="SPEC",
              help="slow-host:NODE:F | slow-link:A:B:F | flap:NODE:F:PERIOD_S | bad-port:LEAF:PORT:F "
                   "(F: rate factor; repeatable).")
@click.option("--pattern", default="matchings", type=click.Choice(_PATTERNS),
              help="; ".join(f"{p}: {COST[p]}" for p in _PATTERNS))
@click.option("-k", "--matchings", "k", default=DEFAULT_K, type=click.IntRange(1, 1024),
              help="Matchings (per switch distance for topology).")
@click.option("-b", "--size", "size", default="64M", help="Message size measured.")
@click.option("-n", "--iters", default=20, type=click.IntRange(1, 100000), help="Timed iterations per pair.")
@click.option("--confirm", default=DEFAULT_ALTERNATIONS, type=click.IntRange(0, 64),
              help="Re-measure suspects this many times next to known-good pairs (0: off).")
@click.option("--rules", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_RULES",
              help="validate rules (the confirm phase reads them).")
@click.option("--seed", default=0, type=int, help="Seed of the schedule and the noise.")
@click.option("-o", "--output", default="simulated.json", help="Document; records go to OUTPUT.records.jsonl.")
@click.option("--force", is_flag=True, help="Replace -o and its records file.")
def simulate(nodes, leaf, pod, host_gbs, oversub, noise, faults, pattern, k, size, iters, confirm, rules,
             seed, output, force):
    """SIMULATED: measure a modelled fat-tree (no network is touched) with a large-cluster
    schedule and the sweep's confirm phase; the document says "simulated": true.

    Then `comm-bench validate` and `comm-bench heatmap` read it as they read a real run.
    Prints the rounds used and the predicted wall time of the same run on a real fabric.
    """
    from ..fabric_sim.fabric import Fabric, parse_fault
    from ..fabric_sim.run import SimConfig, simulate as run
    from ..sizes import parse_size
    from ..validate.rules import load_rules

    load_rules(rules)       # a bad rules file fails before anything runs
    fabric = Fabric(nodes, leaf=leaf, pod=pod, host_gbs=host_gbs, oversub=oversub, noise=noise,
                    faults=[parse_fault(f) for f in faults])
    cfg = SimConfig(pattern=pattern, k=k, sizes=(parse_size(size),), iters=iters, confirm=confirm,
                    rules=rules, seed=seed)
    doc = run(fabric, cfg, output, force=force, echo=click.echo)
    s = doc["simulation"]
    # one sentence, broken where it reads well: each part within 80 columns at 4,096 nodes
    click.echo(f"SIMULATED {nodes} nodes, {pattern} k={k}: {s['rounds']} rounds "
               f"({s['first_pass']['rounds']} first pass + {s['confirm']['rounds']} confirm),\n"
               f"  {s['first_pass']['pairs'] + s['confirm']['pairs']} pair measurements of "
               f"{s['all_pairs']} ordered pairs;\n"
               f"  predicted wall time {s['predicted_wall_s']:.1f} s "
               f"(pairwise-concurrent: {s['pairwise_concurrent_rounds']} rounds, "
               f"~{s['pairwise_concurrent_predicted_s']:.0f} s;\n"
               f"  pairwise: {s['all_pairs']} rounds, ~{s['pairwise_predicted_s'] / 3600:.1f} h); "
               f"simulated in {s['simulated_in_s']:.1f} s")
    click.echo(f"wrote {output} and {doc['records_file']}")
