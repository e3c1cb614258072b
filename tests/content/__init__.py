"""What comes in: parsers, the page pipeline, chunking, OpenAPI specs, injection flags."""
