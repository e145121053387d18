"""A selection (``--model-id``/``--iteration-id``, msprof.layouts.base.Selection) as SQL: the one place its
conditions are written, for every layout's tables, facts and timelines."""
import re
from typing import Dict, List, Tuple

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def selection_sql(selection, model: str = "model_id", iteration: str = "iteration") -> Tuple[List[str], Dict[str, int]]:
    """The conditions ``selection`` puts on rows whose model id is the SQL ``model`` and whose iteration is the
    SQL ``iteration`` (a column, or an expression), and their parameters (``:model``, ``:iteration``); none
    for a selection of everything."""
    conditions, args = [], {}
    for sql, name, value in ((model, "model", selection.model_id), (iteration, "iteration", selection.iteration_id)):
        if value is not None:
            conditions.append(f"{sql if _NAME.match(sql) else f'({sql})'} = :{name}")
            args[name] = value
    return conditions, args
