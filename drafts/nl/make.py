import json, copy
import nbformat
src = nbformat.read('/work/main/notebooks/09_zero_fsdp.ipynb', as_version=4)
badge, setup = copy.deepcopy(src.cells[1]), copy.deepcopy(src.cells[2])
for c in (badge, setup):
    c.pop('id', None)
setup.outputs = []; setup.execution_count = None
nb = nbformat.v4.new_notebook()
nb.metadata = copy.deepcopy(src.metadata)
cells = []
def md(text): cells.append(nbformat.v4.new_markdown_cell(text.strip('\n')))
def code(text): cells.append(nbformat.v4.new_code_cell(text.strip('\n')))
exec(open('/work/nl/drafts/nl/cells.py').read())
cells.insert(1, badge); cells.insert(2, setup)
nb.cells = cells
for i, c in enumerate(nb.cells):
    c['id'] = f"nl-{i:02d}"
nbformat.write(nb, '/work/nl/notebooks/nl/kwantisatie.ipynb')
