"""course_lib: the helper library under the notebooks of *Computational challenges of training LLMs*.

Notebooks import from here; every function is defined once, in the module named after its idea.
"""

from course_lib._about import COLAB_REF, REPOSITORY, __version__
from course_lib.base.allocator import keep_freed_memory
from course_lib.base.env import check_env
from course_lib.base.quick_exit import freeze_at_exit

keep_freed_memory()  # freed tensors' memory kept for the next step (course_lib/base/allocator.py)
freeze_at_exit()  # the exit's last garbage collections skipped (course_lib/base/quick_exit.py)

__all__ = ["COLAB_REF", "REPOSITORY", "__version__", "check_env"]
