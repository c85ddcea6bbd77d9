"""The shared base that every chapter builds on: the environment, input checks, the one dtype table, tables,
plots and the one timing harness. It imports nothing from the parts of the course."""
