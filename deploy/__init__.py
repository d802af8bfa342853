"""What deploying takes beyond `pip install` of each service: the pipeline's artefact for `spark-submit`."""
