"""The one place where the course's version and public address are written."""

__version__ = "0.1.0"

#: Public repository of the course; notebooks' Colab badges and setup cells are stamped from it.
REPOSITORY = "https://github.com/llm-training-course/computational-challenges"

#: The git tag or commit that Colab installs the course from (``pip install git+REPOSITORY@COLAB_REF``).
COLAB_REF = "v0.1.0"
