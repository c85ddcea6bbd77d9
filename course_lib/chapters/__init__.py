"""Every chapter's own module (``ch01`` ... ``ch10``): that chapter's own tables, plots and exercises.
Algorithms never live here; they live in the part of the course that teaches them."""
