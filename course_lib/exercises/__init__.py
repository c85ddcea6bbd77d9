"""The exercise machinery that every chapter uses: numeric questions (:mod:`~course_lib.exercises.questions`); each chapter's
exercises live in its module under :mod:`course_lib.chapters`."""
