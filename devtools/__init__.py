"""Development tools, not part of the pipeline package (include/tokokita_etl never imports them).

`devtools.samples` generates large raw order partitions (`python -m devtools.samples`);
`devtools.reference` is the row-by-row reference implementation of the data contract. The
tests use both (the reference as a differential oracle) and so do the benchmarks (the
reference as the plain-Python baseline); tests and benchmarks never import each other.
"""
