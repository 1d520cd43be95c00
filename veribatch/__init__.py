"""veribatch: LLM-assisted program-verification benchmarks (InvBench, CE-Bench, REFUTE,
DafnyComp) on a laptop or a SLURM cluster.

One top-level import name, so that installing veribatch never shadows another project's
package: the card's parts are its subpackages — `veribatch.launch` (CLI, planning,
executors), `veribatch.tasks` (the benchmarks), `veribatch.inference` (engines),
`veribatch.verifiers` (tools behind one result contract), `veribatch.aggregate` (tables),
`veribatch.containers` (Apptainer images); `slurm_profiles/` and `nightly/` are shipped data.
"""
