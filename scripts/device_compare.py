#!/usr/bin/env python3
"""Compares kgpu's JSON output with nvidia-smi (and pynvml when installed) on a real GPU.

Usage: device_compare.py OUT_DIR   (the directory scripts/device-check.sh filled). Prints markdown.
"""
import csv
import json
import os
import sys

out = sys.argv[1]
rows = []


def check(what, ours, theirs, ok):
    rows.append((what, ours, theirs, "yes" if ok else "NO"))


def load_json(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001 - report, keep going
        print(f"cannot read {name}: {e}")
        return None


def load_csv(name, ncols):
    """Rows with at least ncols columns (nvidia-smi prints an error line instead when a field is unknown)."""
    try:
        with open(os.path.join(out, name)) as f:
            return [[c.strip() for c in r] for r in csv.reader(f) if len(r) >= ncols]
    except Exception as e:  # noqa: BLE001
        print(f"cannot read {name}: {e}")
        return []


inv = load_json("kgpu-inventory.json")
tel = load_json("kgpu-telemetry.json")
procs = load_json("kgpu-processes.json") or []
static = load_csv("smi-static.csv", 14)
cc = load_csv("smi-cc.csv", 1)
dyn = load_csv("smi-dynamic.csv", 11)
apps = load_csv("smi-apps.csv", 3)

if inv:
    for i, g in enumerate(inv["gpus"]):
        if i >= len(static):
            check(f"GPU {i} present in nvidia-smi", "yes", "no", False)
            continue
        (idx, uuid, name, bus, devid, subdev, memtotal, serial, driver, migcur, migpend, maxsm, maxmem,
         plimit) = static[i][:14]
        check(f"GPU {i} index", g["index"], idx, str(g["index"]) == idx)
        check(f"GPU {i} uuid", g["uuid"], uuid, g["uuid"] == uuid)
        check(f"GPU {i} name", g["name"], name, g["name"] == name)
        check(f"GPU {i} pci bus id", g["pci"]["busId"], bus, g["pci"]["busId"].lower() == bus.lower())
        ours_dev = int(g["pci"]["deviceId"], 16) << 16 | int(g["pci"]["vendorId"], 16)
        check(f"GPU {i} pci device id", hex(ours_dev), devid, ours_dev == int(devid, 16))
        check(f"GPU {i} subsystem id", g["pci"]["subsystemId"], subdev,
              int(g["pci"]["subsystemId"], 16) == int(subdev, 16))
        check(f"GPU {i} memory total MiB", g["memoryTotalMiB"], memtotal, str(g["memoryTotalMiB"]) == memtotal)
        check(f"GPU {i} serial", g["serial"], serial, (g["serial"] or "") == serial)
        check("driver version", inv["driverVersion"], driver, inv["driverVersion"] == driver)
        if cc and i < len(cc):
            check(f"GPU {i} compute capability", g["computeCapability"], cc[i][0], g["computeCapability"] == cc[i][0])
        mig = g["mig"]
        smi_mig = migcur.lower()
        ours_mig = "n/a" if not mig["capable"] else ("enabled" if mig["enabled"] else "disabled")
        check(f"GPU {i} MIG mode (current)", ours_mig, migcur, ours_mig == smi_mig or (ours_mig == "n/a" and "n/a" in smi_mig.lower()))
        ours_pend = "n/a" if not mig["capable"] else ("enabled" if mig["pendingEnabled"] else "disabled")
        check(f"GPU {i} MIG mode (pending)", ours_pend, migpend, ours_pend == migpend.lower() or (ours_pend == "n/a" and "n/a" in migpend.lower()))
        check(f"GPU {i} max SM clock MHz", g["maxClocksMHz"]["sm"], maxsm, str(g["maxClocksMHz"]["sm"]) == maxsm)
        check(f"GPU {i} max memory clock MHz", g["maxClocksMHz"]["memory"], maxmem, str(g["maxClocksMHz"]["memory"]) == maxmem)
        try:
            check(f"GPU {i} power limit W", g["powerLimitW"], plimit, abs(float(g["powerLimitW"]) - float(plimit)) < 0.5)
        except (TypeError, ValueError):
            check(f"GPU {i} power limit W", g["powerLimitW"], plimit, False)
        check(f"GPU {i} architecture", g["architecture"], "(Hopper expected on H100/H200)", g["architecture"] is not None)
        check(f"GPU {i} GPM supported", g["gpm"], "(Hopper: yes)", g["gpm"] is True or g["architecture"] != "Hopper")
    check("topology matrix size", len(inv["topology"]), len(static), len(inv["topology"]) == len(static))

if tel:
    gpus = [t for t in tel if t["gpuInstanceId"] is None]
    for t in gpus:
        i = t["gpu"]
        if i >= len(dyn):
            continue
        (_, temp, mtemp, power, smclk, memclk, util, memutil, used, free, total) = dyn[i][:11]
        def near(a, b, tol):
            try:
                return abs(float(a) - float(b)) <= tol
            except (TypeError, ValueError):
                return False
        check(f"GPU {i} temperature C (±5)", t["gpuTempC"], temp, near(t["gpuTempC"], temp, 5))
        if mtemp not in ("N/A", "[N/A]"):
            check(f"GPU {i} memory temperature C (±5)", t["memoryTempC"], mtemp, near(t["memoryTempC"], mtemp, 5))
        check(f"GPU {i} power W (±40%)", t["powerW"], power, near(t["powerW"], power, max(30.0, 0.4 * float(power or 0))))
        check(f"GPU {i} memory clock MHz (±10%)", t["memClockMHz"], memclk, near(t["memClockMHz"], memclk, 0.1 * float(memclk or 0) + 1))
        check(f"GPU {i} FB total MiB", t["fbTotalMiB"], total, near(t["fbTotalMiB"], total, 1))
        check(f"GPU {i} FB used MiB (±1024, load changes)", t["fbUsedMiB"], used, near(t["fbUsedMiB"], used, 1024))
        check(f"GPU {i} GPU utilization % present", t["gpuUtilPct"], util, t["gpuUtilPct"] is not None)
        check(f"GPU {i} energy counter present", t["energyMJ"], "-", t["energyMJ"] is not None)
        check(f"GPU {i} GPM graphics engine active (under load > 0)", t["grEngineActive"], "-", t["grEngineActive"] is not None)
        check(f"GPU {i} GPM tensor active", t["tensorActive"], "-", t["tensorActive"] is not None)
        check(f"GPU {i} NVML call errors", len(t["errors"]), 0, not t["errors"])
        if t["errors"]:
            print(f"GPU {i} call errors: {t['errors']}")

if apps:
    smi_pids = sorted(int(a[0]) for a in apps if a and a[0].isdigit())
    our_pids = sorted(p["pid"] for p in procs)
    check("compute process pids", our_pids, smi_pids, set(smi_pids) <= set(our_pids) or set(our_pids) <= set(smi_pids))
    for p in procs:
        for a in apps:
            if a[0].isdigit() and int(a[0]) == p["pid"] and p["usedMemoryBytes"] is not None:
                check(f"pid {p['pid']} used memory MiB", p["usedMemoryBytes"] >> 20, a[1], abs((p["usedMemoryBytes"] >> 20) - int(a[1])) <= 2)

try:  # NVIDIA's own binding as a second peer for values nvidia-smi does not print.
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    if inv:
        g = inv["gpus"][0]
        check("pynvml NUMA/minor", g["minorNumber"], pynvml.nvmlDeviceGetMinorNumber(h), g["minorNumber"] == pynvml.nvmlDeviceGetMinorNumber(h))
        check("pynvml architecture enum", g["architecture"], pynvml.nvmlDeviceGetArchitecture(h), True)
        try:
            attrs = pynvml.nvmlDeviceGetAttributes_v2(h)
            check("pynvml SM count", g["smCount"], attrs.multiprocessorCount, g["smCount"] == attrs.multiprocessorCount)
        except Exception as e:  # noqa: BLE001
            print("pynvml attributes:", e)
    if tel:
        t = [x for x in tel if x["gpuInstanceId"] is None][0]
        try:
            m = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            check("pynvml FB reserved MiB", t["fbReservedMiB"], m.reserved >> 20, t["fbReservedMiB"] == m.reserved >> 20)
        except Exception as e:  # noqa: BLE001
            print("pynvml memory v2:", e)
        try:
            rr = pynvml.nvmlDeviceGetRemappedRows(h)
            check("pynvml remapped rows (corr, unc, pending, failure)",
                  [t["remappedRowsCorrectable"], t["remappedRowsUncorrectable"], t["remapPending"], t["remapFailure"]],
                  list(rr), [t["remappedRowsCorrectable"], t["remappedRowsUncorrectable"]] == list(rr)[:2])
        except Exception as e:  # noqa: BLE001
            print("pynvml remapped rows:", e)
except ImportError:
    print("pynvml not installed: skipped")

print("| check | kgpu | reference | match |")
print("|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
bad = [r for r in rows if r[3] != "yes"]
print(f"\n{len(rows) - len(bad)} of {len(rows)} checks matched.")
