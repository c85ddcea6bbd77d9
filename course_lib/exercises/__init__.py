"""The exercise machinery that every chapter uses.

Numeric questions (:mod:`~course_lib.exercises.questions`), code exercises
(:mod:`~course_lib.exercises.checker`; on ranks :mod:`~course_lib.exercises.ranks`),
predictions (:mod:`~course_lib.exercises.predictions`), grading (each answer re-checked in a
fresh process by :mod:`~course_lib.exercises.recheck`), and feedback wrapped at 88 characters
for the book (:mod:`~course_lib.exercises.wrapping`). Each chapter's
exercises live in its module under :mod:`course_lib.chapters`.
"""
