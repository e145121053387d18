"""The host's name dictionaries (type_info_dic, hash_dic) for the standalone families database only: the
PROF host database has them already (``type_name``, ``hash_string``), with the same decoders."""
from msprof.decode.dicts import HashDecoder, TypeInfoDecoder
from msprof.layouts.prof.families.base import Family, kinds
from msprof.layouts.prof.schema import HOST

FAMILY = Family("names", "host", kinds((r"^(un)?aging\.additional\.type_info_dic$", "type_info_dic"),
                                       (r"^(un)?aging\.additional\.hash_dic$", "hash_dic")),
                {"type_name": HOST.tables["type_name"], "hash_string": HOST.tables["hash_string"]},
                {"type_info_dic": lambda item: TypeInfoDecoder(), "hash_dic": lambda item: HashDecoder()})
