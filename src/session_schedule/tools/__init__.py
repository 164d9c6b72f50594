"""The tool catalog: schemas, descriptions, handlers and adapters for model APIs."""
