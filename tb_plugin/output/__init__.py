"""Output encodings shared by the server and the CLI: JSON (`encoding`), CSV (`tabular`) and the
rows a CSV export of each view holds (`rows`). No TensorBoard import, no analysis import."""
