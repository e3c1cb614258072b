"""Per-language tag queries for the symbol table, in the style of tree-sitter's `tags.scm`.

tree-sitter-language-pack ships grammars but no tags queries, so each language has its own small ones
here. A definition pattern captures the definition node as `@definition.<kind>` and its name as
`@name`; `@scope` marks a node that qualifies the definitions inside it without being one itself (a
Rust `impl`). A constant inside a function body is a local and is dropped (services/code/
symbols.py), so patterns need not be rooted at the file. `references` are the node types whose text
is an identifier as written (every use of a name: calls, attribute access, imports, types), minus the
names of definitions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SymbolLanguage:
    grammar: str  # tree-sitter-language-pack name
    definitions: str  # the query (patterns are tried in order: the first to capture a name wins)
    references: tuple[str, ...]  # identifier node types
    separator: str = "."  # between the parts of a qualified name
    module: str = ""  # how the file's own qualifier is found: "python" (its path), "go" / "java" (package)


_PYTHON = """
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
(assignment left: (identifier) @name) @definition.constant
"""

_JS_COMMON = """
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.method
(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)]) @definition.function
(lexical_declaration (variable_declarator name: (identifier) @name) @definition.constant)
"""
_JAVASCRIPT = _JS_COMMON + "(class_declaration name: (identifier) @name) @definition.class\n"
_TYPESCRIPT = (
    _JS_COMMON
    + """
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(function_signature name: (identifier) @name) @definition.function
(method_signature name: (property_identifier) @name) @definition.method
(abstract_method_signature name: (property_identifier) @name) @definition.method
(internal_module name: (identifier) @name) @definition.module
"""
)
_JS_REFERENCES = ("identifier", "property_identifier", "shorthand_property_identifier")
_TS_REFERENCES = (*_JS_REFERENCES, "type_identifier")

_GO = """
(function_declaration name: (identifier) @name) @definition.function
(method_declaration name: (field_identifier) @name) @definition.method
(type_spec name: (type_identifier) @name) @definition.type
(type_alias name: (type_identifier) @name) @definition.type
(const_declaration (const_spec name: (identifier) @name) @definition.constant)
"""

_RUST = """
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(struct_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(union_item name: (type_identifier) @name) @definition.struct
(trait_item name: (type_identifier) @name) @definition.trait
(mod_item name: (identifier) @name) @definition.module
(type_item name: (type_identifier) @name) @definition.type
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
(macro_definition name: (identifier) @name) @definition.macro
(impl_item type: (_) @name) @scope
"""

_JAVA = """
(class_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(record_declaration name: (identifier) @name) @definition.class
(annotation_type_declaration name: (identifier) @name) @definition.interface
(method_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.method
(field_declaration declarator: (variable_declarator name: (identifier) @name)) @definition.constant
"""

_C = """
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition
  declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
  @definition.function
(struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
(union_specifier name: (type_identifier) @name body: (_)) @definition.struct
(enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
(type_definition declarator: (type_identifier) @name) @definition.type
(preproc_def name: (identifier) @name) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.macro
"""
_CPP = """
(function_definition
  declarator: (function_declarator
    declarator: [(identifier) (field_identifier) (qualified_identifier) (destructor_name) (operator_name)] @name))
  @definition.function
(function_definition
  declarator: (pointer_declarator declarator: (function_declarator
    declarator: [(identifier) (qualified_identifier)] @name))) @definition.function
(function_definition
  declarator: (reference_declarator (function_declarator
    declarator: [(identifier) (qualified_identifier)] @name))) @definition.function
(class_specifier name: (type_identifier) @name body: (_)) @definition.class
(struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
(union_specifier name: (type_identifier) @name body: (_)) @definition.struct
(enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
(namespace_definition name: (namespace_identifier) @name) @definition.module
(type_definition declarator: (type_identifier) @name) @definition.type
(alias_declaration name: (type_identifier) @name) @definition.type
(preproc_def name: (identifier) @name) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.macro
"""

_RUBY = """
(class name: [(constant) (scope_resolution)] @name) @definition.class
(module name: [(constant) (scope_resolution)] @name) @definition.module
(method name: (_) @name) @definition.method
(singleton_method name: (_) @name) @definition.method
(assignment left: (constant) @name) @definition.constant
"""

_C_REFERENCES = ("identifier", "field_identifier", "type_identifier")

#: CODE_LANGUAGES names (services/parsers/text.py) with symbol queries.
LANGUAGES: dict[str, SymbolLanguage] = {
    "python": SymbolLanguage("python", _PYTHON, ("identifier",), module="python"),
    "javascript": SymbolLanguage("javascript", _JAVASCRIPT, _JS_REFERENCES),
    "jsx": SymbolLanguage("javascript", _JAVASCRIPT, _JS_REFERENCES),
    "typescript": SymbolLanguage("typescript", _TYPESCRIPT, _TS_REFERENCES),
    "tsx": SymbolLanguage("tsx", _TYPESCRIPT, _TS_REFERENCES),
    "go": SymbolLanguage(
        "go", _GO, ("identifier", "field_identifier", "type_identifier", "package_identifier"), module="go"
    ),
    "rust": SymbolLanguage("rust", _RUST, _C_REFERENCES, separator="::"),
    "java": SymbolLanguage("java", _JAVA, ("identifier", "type_identifier"), module="java"),
    "c": SymbolLanguage("c", _C, _C_REFERENCES),
    "cpp": SymbolLanguage("cpp", _CPP, (*_C_REFERENCES, "namespace_identifier"), separator="::"),
    "ruby": SymbolLanguage("ruby", _RUBY, ("identifier", "constant"), separator="::"),
}

#: kinds whose functions are methods, and whose names qualify what they hold
CONTAINERS = frozenset({"class", "struct", "interface", "trait", "enum", "scope", "type"})
