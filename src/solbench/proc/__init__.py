"""Process handling at the bottom of solbench's layers: reads of /proc (:mod:`.procfs`),
signals to process trees, stopping and reaping (:mod:`.signals`), bounded line reading from
a pipe (:mod:`.lines`), the registry of this process's own helper processes
(:mod:`.registry`) and the parent-death watchdog (:mod:`.watchdog`).

Used by the harness (workers, the stray-process guard, freezing a candidate), the SOL
counting child (:mod:`solbench.sol.isolated`) and the CLI (:mod:`solbench.cli.lifetime`).
Imports nothing else of solbench, and nothing outside the standard library. Linux only.
Import the submodules themselves (``from solbench.proc import procfs, signals``): this
package imports none of them, so the watchdog script loads only what it uses.
"""
