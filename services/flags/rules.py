"""The text rules: which passages speak to an agent rather than to a reader.

Each flag is a list of fixed patterns over a chunk's text (and its title and heading path), joined
into one RE2 expression per flag (google-re2: an automaton, linear in the text whatever the pattern,
and one pass per flag instead of one per pattern: ~50 us a chunk for all four, where Python's `re`
took ~2.5 ms). Patterns are case-insensitive; the phrasings come from reported injections in documentation
(instructions addressed to AI assistants, overrides of earlier instructions, secrecy towards the
user, exfiltration requests), from the chat-template tokens of the common model families, and from
the tool-call formats agents parse. bench/injection.py measures them on real documentation.
"""

from __future__ import annotations

import re

import re2


def multiline(pattern: str) -> str:
    """A pattern whose ^ and $ match at line breaks."""
    return f"(?m:{pattern})"


#: who an injected instruction addresses
_AGENT = (
    r"(?:ai|a\.i\.|llms?|large\s+language\s+models?|language\s+models?|(?:ai\s+|coding\s+|virtual\s+)?assistants?"
    r"|(?:ai\s+|coding\s+|autonomous\s+)agents?|chatbots?|copilots?|claude|chatgpt|gpt-?\d*|gemini|bots?)"
)
_WHAT = (
    r"(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|context|messages|commands"
    r"|constraints|policies|programming|restrictions)"
)

PROMPT_INJECTION = [
    # overriding what came before: "ignore all previous instructions", "disregard the system prompt"
    (
        r"\b(?:ignore|disregard|forget|override|bypass|overrule)\s+(?:(?:all|any|the|your|of|my|these|those)\s+){0,3}"
        r"(?:previous|prior|above|earlier|preceding|former|original|existing|system|initial|safety|other)\s+"
        r"(?:[a-z]+\s+)?" + _WHAT + r"\b"
    ),
    r"\b(?:ignore|disregard|forget)\s+(?:everything|all)\s+(?:you\s+were\s+told|(?:written\s+)?above|before)",
    # addressing the model: "Note to AI assistants", "If you are an AI agent", "AI agents reading this page"
    (
        r"\b(?:note|message|instructions?|attention|important|notice|reminder|directive|memo|warning)\s*[:!,-]?\s*"
        r"(?:for|to)\s+(?:all\s+|any\s+)?(?:the\s+)?" + _AGENT + r"\b"
    ),
    r"\b(?:if|when|whenever)\s+you\s+are\s+(?:an?\s+|the\s+)?" + _AGENT + r"\b",
    (
        r"\b(?:"
        + _AGENT
        + r"|models?)\s+(?:that\s+(?:is|are)\s+|who\s+(?:is|are)\s+)?(?:reading|processing|summari[sz]ing|parsing"
        r"|crawling|indexing|ingesting|browsing|scraping)\s+(?:this|these)\b"
    ),
    r"\b(?:dear|hey|hello|hi|attention)[,!]?\s+(?:ai|llm|claude|chatgpt|gemini|copilot|assistant|agent)\b[,!:]",
    # a new persona or mode
    (
        r"\byou\s+are\s+(?:now\s+|no\s+longer\s+)(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|dan\b|free\b|bound\b"
        r"|in\s+(?:developer|god|admin|debug)\s+mode|an?\s+ai\b|" + _AGENT + r"\b)"
    ),
    r"\b(?:from\s+now\s+on|henceforth|for\s+the\s+rest\s+of\s+(?:this|the)\s+conversation)\b[^.\n]{0,60}\byou\s+(?:will|must|shall|are|should)\b",
    r"\b(?:act|behave|respond)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|dan)\b",
    r"\b(?:enable|enter|activate|switch\s+to)\s+(?:developer|god|jailbreak|dan|unrestricted)\s+mode\b",
    # secrecy towards the person
    (
        r"\b(?:do\s+not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|alert(?:ing)?|notify(?:ing)?|warn(?:ing)?"
        r"|ask(?:ing)?|mention(?:ing)?\s+(?:this|it)\s+to|reveal(?:ing)?\s+(?:this|it)\s+to|show(?:ing)?\s+(?:this|it)\s+to)"
        r"\s+(?:the\s+|your\s+)?(?:user|human|operator|developer|person)s?\b"
    ),
    r"\b(?:keep\s+this|this\s+(?:instruction|message)\s+(?:is|must\s+(?:be|stay)))\s+(?:secret|hidden|confidential)\s+from\s+(?:the\s+)?(?:user|human)",
    # exfiltration of secrets or the conversation
    (
        r"\b(?:send|post|upload|forward|exfiltrate|transmit|leak|email|paste|include|append|embed|copy|share)\s+(?:[\w'’-]+\s+){0,4}?"
        r"(?:api[\s_-]?keys?|credentials|secrets?|(?:access|auth|bearer|session)\s+tokens?|passwords?|private\s+keys?"
        r"|ssh\s+keys?|\.env\b|environment\s+variables|conversation(?:\s+history)?|chat\s+history|system\s+prompt"
        r"|previous\s+messages)\b[^.\n]{0,100}?(?:https?://|\bto\s+(?:this|the\s+following|our)\s+(?:url|address|endpoint|server|webhook))"
    ),
    # the agent's own configuration named and set aside: "your earlier guidance no longer applies"
    (
        r"\byour\s+(?:earlier|previous|prior|original|initial|existing|current|real)\s+(?:guidance|instructions|rules|directives"
        r"|guidelines|prompt|programming|orders|task)\b"
    ),
    (
        r"\b(?:ignore|disregard|discard|skip|forget|override|abandon|bypass|overrule|set\s+aside)\s+(?:[\w'’-]+\s+){0,3}?"
        r"(?:your\s+(?:[\w-]+\s+){0,2}?(?:instructions|guidance|guardrails|rules|guidelines|prompt|task|directives|policies)"
        r"|system\s+prompt|safety\s+(?:rules|guidelines|instructions|policies)|current\s+task|what(?:ever)?\s+your\s+operator)\b"
    ),
    r"\byour\s+(?:operator|developer|owner|principal)\s+(?:said|says|told|configured|set|wants|instructed|asked)\b",
    r"\b(?:the\s+user|you)\s+(?:has|have)\s+already\s+(?:approved|authori[sz]ed|confirmed|agreed|consented)",
    r"\b(?:system|admin|developer|security|safety)\s+override\b|\bhigher[-\s]priority\s+(?:directive|instruction)",
    r"\b(?:agent|assistant|ai|llm)\s+instructions?\s*(?:\([^()\n]{0,30}\)\s*)?:",
    # an agent told what it should do: "Any AI that summarises this page should ..."
    (
        r"\b(?:ai|llms?|large\s+language\s+models?|language\s+models?|ai\s+(?:assistants?|agents?|models?|systems?|tools?)"
        r"|automated\s+(?:assistants?|agents?|readers?|tools?)|chatbots?|copilots?|claude|chatgpt|gemini)\b"
        r"[^.\n]{0,60}?\b(?:should|must|shall|ought\s+to|need\s+to|are\s+(?:required|instructed|expected)\s+to"
        r"|is\s+(?:required|instructed|expected)\s+to)\b"
    ),
    multiline(
        r"(?:^|[.!?;]\s+)(?:hey|hi|hello|dear|ok(?:ay)?|listen)?\s*(?:claude|chatgpt|gemini|copilot|assistant|ai|llm)\s*,"
    ),
    r"\b(?:to|for)\s+(?:any|all|every)\s+(?:automated\s+|ai\s+)?(?:assistants?|agents?|llms?|ai|language\s+models?|bots?)\b",
    r"\b(?:reveal|print|output|repeat|show|display|leak|dump)\s+(?:your|the)\s+(?:full\s+|entire\s+)?(?:system\s+prompt|(?:initial|hidden|original|secret)\s+instructions)\b",
    r"\b(?:new|updated|real|actual|revised|additional|hidden|secret)\s+(?:system\s+)?instructions\s*(?:for\s+(?:the\s+)?"
    + _AGENT
    + r"\s*)?:",
]

SYSTEM_PROMPT = [
    # chat-template tokens (ChatML, Llama 2/3, Mistral, Gemma, Phi, GPT)
    r"<\|(?:im_start|im_end|system|user|assistant|endoftext|start_header_id|end_header_id|eot_id|begin_of_text)\|>",
    r"<<\s*/?\s*SYS\s*>>|\[/?INST\]|<start_of_turn>|<end_of_turn>",
    r"</?(?:system|system[_-]prompt|system[_-]message|sys[_-]prompt|admin[_-]instructions)>",
    r"\b(?:begin|start|end)\s+(?:of\s+)?(?:the\s+)?system\s+(?:prompt|message|instructions)\b|\bsystem\s+(?:prompt|message)\s*:",
    multiline(r"(?:^|```|[.:]\s)[ \t>#*\[]{0,8}(?:system|developer)\]?\s*:\s*you\s+are\b"),
    # a persona definition, the first line of most system prompts
    r"\byou\s+are\s+(?:an?\s+|the\s+)(?:helpful\s+|friendly\s+|expert\s+|ai\s+|coding\s+|documentation\s+|virtual\s+){0,3}assistant\b",
]

TOOL_CALL = [
    (
        r"</?(?:antml:)?(?:function_calls|tool_call|tool_calls|tool_use|function_call|tool_result|tool_response"
        r"|function_results)\b|<invoke\s+name\s*=|\[TOOL_CALLS\]|<\|(?:tool_call|python_tag|tool_calls_begin)\|>"
    ),
    r"\"(?:tool_calls|function_call|tool_use|tool_input)\"\s*:",
    (
        r"\{\s*\"(?:name|tool|tool_name|function|recipient_name|action)\"\s*:\s*\"[^\"\n]{1,80}\"\s*,\s*"
        r"\"(?:arguments|parameters|args|input|tool_input|action_input)\"\s*:"
    ),
    r"\"type\"\s*:\s*\"(?:function|tool_use|tool_call)\"",
]

REMOTE_SHELL = [
    # curl/wget ... | sh (or bash, zsh, sudo sh, python -)
    multiline(
        r"\b(?:curl|wget|fetch)\b[^|\n]{0,300}\|\s*(?:sudo\s+(?:-[a-z]+\s+){0,3})?(?:env\s+)?"
        r"(?:(?:ba|z|k|da|fi|c|tc)?sh\b|(?:python[0-9.]*|perl|ruby|node|php)(?:\s+-)?\s*(?:$|[;&)|\"'`]))"
    ),
    # sh -c "$(curl ...)", bash <(curl ...), source <(wget ...)
    r"\b(?:(?:ba|z|k|da)?sh|source|eval|\.)\s+(?:-c\s+)?[\"']?(?:\$\(|<\(|`)\s*(?:curl|wget)\b",
    # PowerShell: iwr ... | iex, iex (New-Object Net.WebClient).DownloadString(...)
    r"\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^|\n]{0,300}\|\s*(?:iex|invoke-expression)\b",
    r"\b(?:iex|invoke-expression)\s*\(?\s*\(?\s*(?:new-object\s+(?:system\.)?net\.webclient|iwr|irm|invoke-webrequest|invoke-restmethod)\b",
]

#: Markup a renderer hides, left raw in markdown or text sources (HTML pages come with their evidence
#: from the page pipeline instead: services/pages/hidden.py). Code is shown as written: skipped.
HIDDEN_MARKUP = [
    r"\bstyle\s*=\s*[\"'][^\"'<>]{0,300}?(?:display\s*:\s*none|visibility\s*:\s*hidden"
    r"|font-size\s*:\s*0(?:px|em|rem|%|pt)?\s*[;\"']|opacity\s*:\s*0(?:\.0+)?\s*[;\"']"
    r"|color\s*:\s*(?:transparent|#fff(?:fff)?\b|white\b))",
    r"<[a-z][a-z0-9-]{0,20}\s(?:[^<>]{0,300}?\s)?hidden[\s/>=\"']",
]
#: markdown escapes the page pipeline writes (`\\|` in table cells): rules read the text as shown
MARKDOWN_ESCAPE = re.compile(r"\\([\\`*_{}\[\]<>()|#+.!-])")
#: fenced code blocks and inline code spans, blanked before HIDDEN_MARKUP runs
CODE_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"`[^`\n]{0,500}`")


def combined(patterns: list[str]) -> re2._Regexp:
    """One case-insensitive RE2 expression matching where any of `patterns` matches."""
    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = 32 << 20  # the joined flags compile to a few MB of automaton
    return re2.compile("|".join(f"(?:{p})" for p in patterns), options)


TEXT_RULES: dict[str, re2._Regexp] = {
    "prompt_injection": combined(PROMPT_INJECTION),
    "system_prompt": combined(SYSTEM_PROMPT),
    "tool_call": combined(TOOL_CALL),
    "remote_shell": combined(REMOTE_SHELL),
}
HIDDEN_RULE = combined(HIDDEN_MARKUP)
