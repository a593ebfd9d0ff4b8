"""Two (or more) implementations of one call timed side by side in one process, as the A/B
benches here do it: each round runs every side once unmeasured, then `calls` times measured, in an
order that turns around every round (a, b / b, a), recording wall and process CPU time per call
in ms (PoCL's worker threads count in the process's CPU time); plus the load average before and
after. Returns (samples, medians, loads): samples[name] = {'wall': [...], 'cpu': [...]}."""
import os
import statistics
import time


def alternate(sides, rounds, calls):
    """sides: dict name -> callable taking no arguments (two or more, in their first round's order)."""
    names = list(sides)
    stats = {name: {'wall': [], 'cpu': []} for name in names}
    loads = [os.getloadavg()[0]]
    for rnd in range(rounds):
        for name in (names if rnd % 2 == 0 else names[::-1]):
            run = sides[name]
            run()
            w, c = time.perf_counter(), time.process_time()
            for _ in range(calls):
                run()
            stats[name]['wall'].append((time.perf_counter() - w) / calls * 1e3)
            stats[name]['cpu'].append((time.process_time() - c) / calls * 1e3)
    loads.append(os.getloadavg()[0])
    med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in stats.items()}
    return stats, med, loads
