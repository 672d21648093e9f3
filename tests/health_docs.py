"""Results documents with recorded health blocks (ranks[i].health), for the health tests.

The healthy GPU reading is an H200's as NVML answered it (clocks at their maximum, no
clock-event reason, PCIe Gen5 x16, 18 NVLinks up, ECC on with no errors); each fault
changes only the fields a GPU or NIC with that fault reports differently."""
import copy
import json

from test_hostile_figures import base


def gpu_reading(index=0, **over):
    r = {"available": True, "source": "nvml",
         "gpu": {"index": index, "name": "NVIDIA H200", "uuid": f"GPU-0000000{index}", "bus_id": "0000:1b:00.0"},
         "clocks_mhz": {"sm": 1980, "sm_max": 1980, "mem": 3201, "mem_max": 3201},
         "clock_events": {"mask": 0, "active": []},
         "throttle_ns": {"power": 0, "thermal": 0, "sync_boost": 0, "board_limit": 0, "reliability": 0},
         "temperature": {"gpu_c": 41, "slowdown_c": 87, "shutdown_c": 92},
         "power": {"draw_w": 312.4, "limit_w": 700.0, "default_limit_w": 700.0},
         "pcie": {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "replays": 0},
         "nvlink": {"supported": True, "links": [{"link": i, "up": True} for i in range(18)]},
         "ecc": {"enabled": True, "volatile_uncorrected": 0, "aggregate_uncorrected": 0, "volatile_corrected": 0},
         "retired_pages": {"single_bit": 0, "double_bit": 0, "pending": False},
         "row_remap": {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False}}
    r.update(copy.deepcopy(over))
    return r


def nic_reading(dev="mlx5_2", symbol_error=3, **over):
    r = {"available": True, "source": "sysfs", "device": dev, "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
         "link_layer": "InfiniBand", "rate": "400 Gb/sec (4X NDR)", "rate_gbps": 400.0,
         "counters": {"symbol_error": symbol_error, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0,
                      "port_xmit_discards": 0, "local_link_integrity_errors": 0,
                      "excessive_buffer_overrun_errors": 0, "port_rcv_remote_physical_errors": 0},
         "hw_counters": {"local_ack_timeout_err": 0, "out_of_sequence": 0, "packet_seq_err": 0}}
    r.update(copy.deepcopy(over))
    return r


def healthy_block(rank):
    after = gpu_reading(xid={"watched": True, "events": []})
    after["throttle_ns"] = {"power": 0, "thermal": 0, "sync_boost": 0, "board_limit": 0, "reliability": 0}
    return {"gpu": {"before": gpu_reading(xid_watch=True), "after": after},
            "nic": {"before": nic_reading(), "after": nic_reading()}}


def with_health(doc, fault=None, rank=4):
    """doc with a healthy block on every rank; fault(block) changes rank `rank`'s."""
    doc = copy.deepcopy(doc)
    for r in doc["ranks"]:
        r["health"] = healthy_block(r["rank"])
    if fault:
        fault(doc["ranks"][rank]["health"])
    return doc


def slow_host():
    """6 hosts, rank 4 (host node004) confirmed slow at 80%: a bad-host finding."""
    return base()


def fast_hosts():
    """The same 6 hosts with every pair alike: no finding from the figures."""
    doc = base()
    doc["results"] = [dict(r, algbw=45.0, busbw=45.0) for r in doc["results"]]
    return doc


def write(tmp_path, doc, name="r.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


# each fault as a recorded block shows it: (name, change to the block, the cause validate must name, kind)
def _pcie_x8(h):
    for side in ("before", "after"):
        h["gpu"][side]["pcie"]["width"] = 8


def _power_cap(h):
    h["gpu"]["after"].update(clock_events={"mask": 0x4, "active": ["sw_power_cap"]},
                             power={"draw_w": 299.6, "limit_w": 300.0, "default_limit_w": 700.0},
                             clocks_mhz={"sm": 1320, "sm_max": 1980, "mem": 3201, "mem_max": 3201})
    h["gpu"]["after"]["throttle_ns"]["power"] = 41_500_000_000     # 41.5 s held at the cap


def _thermal(h):
    h["gpu"]["after"].update(clock_events={"mask": 0x40, "active": ["hw_thermal_slowdown"]},
                             temperature={"gpu_c": 89, "slowdown_c": 87, "shutdown_c": 92})
    h["gpu"]["after"]["throttle_ns"]["thermal"] = 12_000_000_000


def _nvlink_down(h):
    for side in ("before", "after"):
        for link in h["gpu"][side]["nvlink"]["links"]:
            if link["link"] in (3, 11):
                link["up"] = False


def _symbol_errors(h):
    h["nic"]["after"]["counters"]["symbol_error"] = 1207     # 3 before: 1,204 during the run


def _row_remap(h):
    for side in ("before", "after"):
        h["gpu"][side]["row_remap"] = {"correctable": 0, "uncorrectable": 2, "pending": True, "failed": False}


def _xid(h):
    h["gpu"]["after"]["xid"] = {"watched": True, "events": [{"xid": 79}]}


FAULTS = [
    ("pcie-x8", _pcie_x8, "GPU0 at x8 of x16 PCIe", "gpu-pcie-degraded"),
    ("power-cap", _power_cap, "GPU0 throttled: power cap", "gpu-throttled"),
    ("thermal", _thermal, "GPU0 throttled: thermal (hardware slowdown)", "gpu-throttled"),
    ("nvlink-down", _nvlink_down, "GPU0 NVLink 3, 11 down (16 of 18 up)", "gpu-nvlink-down"),
    ("nic-symbol-errors", _symbol_errors, "NIC mlx5_2: 1,204 symbol errors during the run", "nic-port-errors"),
    ("row-remap", _row_remap, "row remap pending", "gpu-memory-errors"),
    ("xid", _xid, "XID 79 (GPU fell off the bus)", "gpu-xid"),
]
