"""The one place where the course's version and public address are written."""

__version__ = "0.1.0"

#: Public repository of the course; the notebooks' badges and setup cells come from it.
REPOSITORY = "https://github.com/llm-training-course/computational-challenges"

#: The git tag or commit that Colab installs the course from
#: (``pip install git+REPOSITORY@COLAB_REF``).
COLAB_REF = "v0.1.0"

#: Whether the course is published: REPOSITORY exists and holds the tag COLAB_REF.
#: Only then do the notebooks and the book's landing page link Colab, Binder and the
#: repository; until then they say how to run a notebook from a clone, and link
#: nothing that does not exist. A fork sets REPOSITORY and COLAB_REF to its own,
#: pushes the tag, sets this to True and re-stamps the notebooks and the book with
#: ``.venv/bin/python tools/notebooks.py``.
PUBLISHED = False
