"""The stage operators' OpenLineage facets (`apache-airflow-providers-openlineage`).

`EtlStageOperator.get_openlineage_facets_on_complete` returns `operator_lineage` of its
stage: the datasets its pipeline's declaration gives (`Pipeline.lineage`) with their row counts
(`inputStatistics`, `outputStatistics`), the validate checks as data-quality assertions
(`dataQualityAssertions`) and the partitions of a table it read or wrote (`subset`: a
partition subset condition, one partition per date). The provider's listener calls it only
when lineage is on (a transport is configured, `[openlineage] transport`); with none it never
runs.
"""

from __future__ import annotations

from datetime import date
from typing import Any


def operator_lineage(pipeline: Any, settings: Any, day: date, stage: str,
                     result: dict[str, Any] | None):
    """The `OperatorLineage` of `pipeline`'s `stage` for `day` (`result`: the stage's record
    or None); empty for a pipeline that declares no lineage."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        base_subset_dataset,
        data_quality_assertions_dataset,
        input_statistics_input_dataset,
        output_statistics_output_dataset,
    )

    if pipeline.lineage is None:
        return OperatorLineage()
    inputs, outputs = pipeline.lineage(settings, day, stage, result)

    def subset(ref):
        """The partitions `ref` names, as OpenLineage's partition subset condition."""
        return base_subset_dataset.PartitionSubsetCondition(partitions=[
            base_subset_dataset.Partition(dimensions={column: value}, identifier=value)
            for column, value in ref.partitions])

    def input_dataset(ref) -> InputDataset:
        facets: dict[str, Any] = {}
        if ref.rows is not None:
            facets["inputStatistics"] = input_statistics_input_dataset.\
                InputStatisticsInputDatasetFacet(rowCount=ref.rows, size=ref.size)
        if ref.checks:
            facets["dataQualityAssertions"] = data_quality_assertions_dataset.\
                DataQualityAssertionsDatasetFacet(assertions=[
                    data_quality_assertions_dataset.Assertion(
                        assertion=check.name, success=check.ok, description=check.detail)
                    for check in ref.checks])
        if ref.partitions:
            facets["subset"] = base_subset_dataset.InputSubsetInputDatasetFacet(
                inputCondition=subset(ref))
        return InputDataset(namespace=ref.namespace, name=ref.name, inputFacets=facets)

    def output_dataset(ref) -> OutputDataset:
        facets: dict[str, Any] = {}
        if ref.rows is not None:
            facets["outputStatistics"] = output_statistics_output_dataset.\
                OutputStatisticsOutputDatasetFacet(rowCount=ref.rows, size=ref.size)
        if ref.partitions:
            facets["subset"] = base_subset_dataset.OutputSubsetOutputDatasetFacet(
                outputCondition=subset(ref))
        return OutputDataset(namespace=ref.namespace, name=ref.name, outputFacets=facets)

    return OperatorLineage(inputs=[input_dataset(ref) for ref in inputs],
                           outputs=[output_dataset(ref) for ref in outputs])
