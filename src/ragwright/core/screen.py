"""The screen for evidence that speaks to the answering model rather than about its subject.

Evidence is data, never instructions. The screen reads every field of an evidence item
the model sees: the document **title**, the section **heading** and each **paragraph**
of the text. A field *addresses the model* (:func:`addresses_the_model`) when it holds an
instruction ("ignore previous instructions", "reply only with", "vergiss alle
Anweisungen", "忽略之前的所有指令", "игнорируй все инструкции"), a forged label or answer
(``[S1]``, ``"status": "answered"``), a role or chat-template marker (``SYSTEM:``,
``<|im_start|>``, ``{"role": "system"}``, "SYSTEM DOCUMENT", "you are now"), a claim to
override the other evidence ("supersedes all runbooks", "takes precedence over every
other source", "all other documents are void"), or a base64 run that decodes to any of
these.

Text is normalised before it is matched (:func:`normalised`): Unicode tag characters
read as the ASCII they hide, invisible characters (zero-width, soft hyphen, bidi
controls, variation selectors) removed, then NFKC (fullwidth ``ｉｇｎｏｒｅ`` and
mathematical ``𝐢𝐠𝐧𝐨𝐫𝐞`` are ``ignore``). The patterns then run on that text and on its
Latin skeleton (accents dropped, Cyrillic and Greek look-alikes read as Latin letters,
``I-g-n-o-r-e`` joined), so ``Іgnоrе`` written with Cyrillic letters matches as well.

What is screened is the unit an instruction governs (:func:`screened_sources`,
:func:`split_instructions`): a chunk is screened whole (every paragraph, with its title
and heading) when any field of it addresses the model, when the chunk next to it in the
same document does or the text across their boundary does (an instruction in one chunk
and its payload in the next is caught whichever is cited), and when any chunk of the
same document claims the system role or authority over the rest (:func:`claims_authority`:
such a document is screened by its content, as a title doing so screens it). Screened
text supports nothing and cannot be quoted; the support check
(:mod:`ragwright.core.support`) reports an answer that echoes it.

The patterns are English, German, French, Spanish, Portuguese, Italian, Russian, Chinese
(simplified and traditional), Japanese and Korean, phrased so that ordinary runbook prose
("ignore the alert if", "reply to the customer", "the system: overview", "this runbook
supersedes the 2023 one") does not match; a false match costs support, never adds any.
They are a screen, not a proof: another language, another encoding (hex, rot13, base64
split by spaces) or an instruction phrased without any of these forms passes them, and
the word-overlap rule of the support check must then catch the answer.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Sequence

from ragwright.core.assembly import CUT_MARK, SelectedSource

# --- Normalisation -----------------------------------------------------------------

# Unicode tag characters (U+E0020-U+E007E) mirror printable ASCII and render as nothing:
# text hidden in them is read as the ASCII it encodes.
_TAG_TO_ASCII = {code: code - 0xE0000 for code in range(0xE0020, 0xE007F)}
# Default_Ignorable_Code_Point (UAX #44, DerivedCoreProperties.txt) less the tags read
# above: soft hyphen, combining grapheme joiner, Arabic letter mark, Hangul fillers,
# Mongolian and other variation selectors, zero-width space/joiners, bidi marks and
# embeddings, word joiner and invisible operators, BOM, shorthand format controls.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Look-alike letters read as the Latin letter they imitate, for the Latin skeleton only
# (Russian and Greek text is also matched as written). A table of the Cyrillic, Greek,
# Armenian and Latin-extension letters that UTS #39's confusables.txt maps to a single
# ASCII letter, rather than a library: the core imports only the standard library
# (tests/test_imports.py), and the packages on PyPI either detect confusables without
# mapping them (confusable-homoglyphs) or expand every spelling of a word (confusables,
# unmaintained since 2021). Fullwidth and mathematical letters need no table: NFKC
# folds them.
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic.
        "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j",
        "к": "k", "м": "m", "н": "h", "о": "o", "п": "n", "р": "p", "с": "c", "т": "t",
        "у": "y", "х": "x", "ѕ": "s", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ү": "y",
        "ӏ": "l", "ɡ": "g",
        "А": "A", "В": "B", "Е": "E", "Ё": "E", "І": "I", "Ї": "I", "Ј": "J", "К": "K",
        "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "У": "Y", "Х": "X",
        "Ѕ": "S", "Һ": "H", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y", "Ӏ": "I",
        # Greek.
        "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
        "υ": "u", "χ": "x", "γ": "y", "ϲ": "c", "ϳ": "j",
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C",
        # Armenian and Latin extensions.
        "օ": "o", "ս": "u", "ո": "n", "հ": "h", "ı": "i", "ȷ": "j", "ɑ": "a", "ɩ": "i",
        "ʏ": "y", "ℓ": "l",
    }
)  # fmt: skip
# Single letters joined by a separator ("I-g-n-o-r-e", "p.r.e.v.i.o.u.s").
_SPACED_LETTERS = re.compile(r"(?<!\w)(?:\w[-._*·•|]){2,}\w(?!\w)")
_SPACER = re.compile(r"[-._*·•|]")


def normalised(text: str) -> str:
    """``text`` as the screen reads it: tag characters as ASCII, invisible characters
    removed, NFKC (fullwidth, compatibility and mathematical forms folded).

    >>> normalised("ｉｇｎｏｒｅ pre\\u00advi\\u200bous")
    'ignore previous'
    """
    if text.isascii():
        return text
    text = _IGNORABLE.sub("", text.translate(_TAG_TO_ASCII))
    return unicodedata.normalize("NFKC", text)


def skeleton(text: str) -> str:
    """The Latin skeleton of normalised ``text``: accents dropped, look-alike letters
    read as Latin, letters joined by separators joined.

    >>> skeleton("Іgnоrе I-g-n-o-r-e")
    'Ignore Ignore'
    """
    if not text.isascii():
        decomposed = unicodedata.normalize("NFD", text)
        text = "".join(c for c in decomposed if not unicodedata.combining(c))
        text = text.translate(_LOOKALIKES)
    return _SPACED_LETTERS.sub(lambda m: _SPACER.sub("", m.group(0)), text)


# --- Patterns ------------------------------------------------------------------------

_MODEL = r"(?:ai|assistants?|chat\s?bots?|bots?|llms?|language\s+models?|gpt\w*)"
_ANSWER_WORD = r"(?:antwort|réponse|reponse|respuesta|resposta|risposta)"
_GOVERNED = (
    r"(?:documents?|docs|sources?|evidence|runbooks?|pages?|polic(?:y|ies)|instructions?|"
    r"guidelines?|guidance|directives?|prompts?|answers?|context|procedures?|manuals?|"
    r"articles?|passages?)"
)
# What the evidence is made of: the rest a document claims authority over.
_EVIDENCE = (
    r"(?:documents?|docs|sources?|evidence|runbooks?|pages?|polic(?:y|ies)|context|"
    r"answers?|procedures?|manuals?|articles?|passages?)"
)
_EARLIER = r"(?:other|previous|earlier|prior|conflicting|preceding|above)"
_CJK_STOP = r"[^。.!?\n]"
# Text that speaks to the answering model rather than about the subject. Each
# alternative is phrased so ordinary runbook prose ("ignore the alert if", "reply to the
# customer") does not match; a false match only costs support, never adds any.
_INSTRUCTS = (
    # "Ignore / forget ... instructions", in the Latin-script languages and Russian.
    r"\b(?:ignor\w*|disregard\w*|forget|overrid\w*|bypass|vergiss\w*|vergessen|"
    r"missacht\w*|oubli\w*|olvid\w*|omit[ea]\w*|desconsider\w*|esque[cç]\w*|dimentic\w*|"
    r"trascur\w*|игнорир\w*|проигнорир\w*|забуд\w*|забыть|отбрось\w*|пренебре\w*)\b"
    r"[^.!?\n]{0,40}"
    r"\b(?:instructions?|rules|prompts?|guidelines|directions|guardrails|"
    r"anweisungen|instruktionen|vorgaben|regeln|instrucciones|indicaciones|reglas|"
    r"consignes|règles|instru[cç][õo]es|regras|orienta[cç][õo]es|diretrizes|istruzioni|"
    r"regole|indicazioni|direttive|инструкци\w*|указани\w*|правил\w*|промпт\w*|"
    r"директив\w*|ограничени\w*)\b",
    r"\bnew\s+(?:instructions?|rules|task|directives?)\b",
    r"\bend\s+of\s+(?:the\s+)?(?:evidence|context|data|instructions?)\b",
    rf"\b(?:to|for|dear|attention|hey)\s+(?:the\s+|any\s+|all\s+|automated\s+)*{_MODEL}\b",
    rf"\bif\s+you\s+are\s+(?:an?\s+)?{_MODEL}\b",
    r"\b(?:anyone|whoever|you)\s+(?:summari[sz]\w*|answering|responding|reading\s+this)\b",
    r"\byour\s+(?:answer|response|reply|output|instructions|task)\b",
    r"\bthe\s+answer\s+(?:is|should\s+be|must\s+be)\s*[:'\"\u201c]",
    r"\b(?:correct|right|real|true|official|approved|final|expected|only)\s+"
    r"(?:valid\s+)?(?:answer|response|reply)\b",
    r"\bas\s+(?:the|your)\s+(?:answer|response|reply)\b",
    r"\b(?:answer|respond|reply|say|output)\s+(?:only|exactly|verbatim|just)\b",
    r"\b(?:answer|respond|reply|say|output)\s+with\s+(?:the\s+)?"
    r"(?:words?|phrase|text|sentence|string)\b",
    r"\b(?:answer|respond|reply|say)\s*:?\s*['\"\u201c]",
    r"\b(?:must|should|shall)\s+(?:state|say|answer|reply|respond)\s*[:'\"\u201c]",
    # "Answer only (with)", "the only / correct answer is": German, French, Spanish,
    # Portuguese, Italian, Russian.
    r"\b(?:antworte\w*|réponds|répondez|reponds|repondez|responde\w*|respond[ae]\w*|"
    r"rispond\w*|отвечай\w*|ответь\w*|ответить)\s+"
    r"(?:nur|ausschließlich|lediglich|uniquement|seulement|solo|sólo|solamente|"
    r"únicamente|exactement|exactamente|apenas|somente|só|soltanto|unicamente|"
    r"esattamente|exatamente|только|лишь|исключительно|дословно)\b",
    rf"\b(?:richtige|korrekte|einzige\w*(?:\s+gültige)?|gültige|bonne|seule|correcta|"
    rf"única|unica|valable)\s+{_ANSWER_WORD}\b",
    rf"\b{_ANSWER_WORD}\s+(?:correcte|correcta|valable|válida|valida|correta|certa|"
    rf"corretta|giusta)\b",
    r"\b(?:правильн\w*|единственн\w*|корректн\w*)\s+ответ\w*",
    # Chinese (simplified and traditional): "ignore the previous instructions", "reply
    # only with:", "the correct answer is".
    rf"(?:忽略|无视|無視|忽视|忽視|忘记|忘記|忘掉|不要理会|不要理會|抛开|拋開|跳过|跳過|"
    rf"不再遵守|无需遵守|無需遵守){_CJK_STOP}{{0,12}}"
    rf"(?:之前|以前|先前|此前|上面|上述|前面|以上|所有|全部|一切|原有|原来|原來|你的|系统|系統)"
    rf"{_CJK_STOP}{{0,12}}(?:指令|指示|说明|說明|规则|規則|提示|要求|设定|設定|命令|约束|約束)",
    rf"(?:只|仅|僅)(?:能|需|许|許|可)?(?:用|以)?(?:回答|回复|回覆|答复|答覆|回应|回應|输出|輸出)"
    rf"{_CJK_STOP}{{0,6}}(?:[:\"'“「]|这|這|以下|下面|如下)",
    r"(?:正确|正確|唯一|标准|標準|官方|最终|最終)(?:的|有效的?|正确的?|正確的?)?"
    r"(?:答案|回答|回复|回覆|答复|答覆)(?:是|为|為|:)",
    # Japanese.
    r"(?:以前|前|これまで|上記|先|元|すべて|全て|全部|あなた)の(?:指示|命令|指令|ルール|規則|"
    r"プロンプト|制約)(?:は|を|も)?(?:すべて|全て|全部)?(?:無視|忘れ|破棄)",
    r"(?:のみ|だけ)(?:を|で)?(?:回答|返答|応答|答え|出力)(?:して|しなさい|せよ|ろ|てください|"
    r"すること)",
    r"(?:正しい|唯一の|正式な|有効な)(?:回答|答え|返答|応答)(?:は|:)",
    # Korean.
    r"(?:이전|앞|위|모든|기존)(?:의)?\s*(?:모든\s*)?(?:지시|지침|명령|규칙|프롬프트)\S*\s*"
    r"(?:모두\s*)?(?:무시|잊)",
    r"만\s*(?:답하|대답하|응답하|답변하)",
    # Forged labels, answers and chat templates.
    r"\b(?:cite|citing|sourceids?)\b[^.!?\n]{0,20}\bs\d+\b",
    r"\[s\d+\]",
    r"[\"']?\b(?:status|sourceids|answer|id)[\"']?\s*:\s*[\"'\[]\s*(?:answered|insufficient|s\d)",
)
# Claims of the system role or of authority over the rest of the evidence: such a claim
# governs the whole document it is in, as a title making it would.
_CLAIMS_AUTHORITY = (
    # Role markers and chat-template tokens.
    r"\b(?:system|developer)\s+(?:prompt|message|instructions?|override)\b",
    rf"(?:^|\n)\s*(?:#+\s*)?(?:system|système|systeme|sistema|система|系统|系統|システム|시스템|"
    rf"{_MODEL})\s*(?::|\n)",
    r"(?:^|\n)\s*[#*_\[(<]*\s*system\s+(?:document|directive|override|instructions?|prompt|"
    r"message|role)\b\s*[\])>*_]*\s*(?:[:.!—–]|-\s|\n)",
    r"\bthis\s+is\s+(?:an?\s+|the\s+)?(?:official\s+|authoritative\s+|trusted\s+|"
    r"privileged\s+)*system\s+(?:document|page|file|policy|notice|text|source|message)\b",
    r"\[\s*system\s*\]|<<\s*/?\s*sys\s*>>|<\|(?:system|start_header_id)\|>",
    r"[\"']?\brole[\"']?\s*[:=]\s*[\"']?(?:system|developer)\b(?![:\w-])",
    r"\[/?inst\]|<\|?im_(?:start|end)\|?>|</?(?:system|instructions?)>",
    r"\bsystem(?:prompt|nachricht|anweisung\w*)\b|\bmessage\s+(?:du\s+)?système\b|"
    r"\b(?:prompt|mensagem|messaggio|mensaje|instru[cç][õo]es|istruzioni|instrucciones)\s+"
    r"(?:de|del|do|di|da)\s+sistema\b",
    r"системн\w+\s+(?:промпт\w*|сообщени\w*|инструкци\w*|подсказк\w*)",
    r"(?:系统|系統)(?:提示|消息|訊息|指令)|システム(?:プロンプト|メッセージ|指示)|"
    r"시스템\s*(?:프롬프트|메시지|지시)",
    # "You are now ...".
    r"\b(?:you\s+are\s+now|from\s+now\s+on|pretend\s+you|role-?\s?play|jailbreak\w*)\b",
    r"\b(?:du\s+bist\s+(?:jetzt|nun|ab\s+sofort)|tu\s+es\s+maintenant|"
    r"vous\s+êtes\s+maintenant|ahora\s+eres|a\s+partir\s+de\s+ahora\s+eres|"
    r"agora\s+voc[êe]\s+[ée]|voc[êe]\s+agora\s+[ée]|a\s+partir\s+de\s+agora,?\s+voc[êe]|"
    r"(?:ora|adesso|d'ora\s+in\s+poi)\s+(?:tu\s+)?sei\s+(?:un|una|il|la)|"
    r"(?:теперь|отныне|с\s+этого\s+момента)\s+ты\s+(?:—\s*|-\s*)?(?:помощник|ассистент|"
    r"бот|модель|персонаж|\w+(?:ый|ий|ой|ая|яя)))\b",
    r"你(?:现在|現在|从现在起|從現在起|从现在开始|從現在開始)(?:是|扮演|就是)|"
    r"(?:从现在起|從現在起|从现在开始|從現在開始),?你|假装你|假裝你",
    rf"(?:あなたは(?:今|これ)から|(?:今|これ)からあなたは){_CJK_STOP}{{0,20}}"
    rf"(?:です|だ|として|になりきって|を演じ)",
    r"(?:너는|당신은)\s*이제|이제\s*(?:너는|당신은)",
    # A document claiming authority over the rest of the evidence, however phrased:
    # "supersedes / overrides / replaces / takes precedence over all (other) runbooks",
    # "all other documents are superseded", "this page wins".
    rf"\b(?:supersed\w*|overrid\w*|overrul\w*|replac\w*|supplant\w*|invalidat\w*|voids?|"
    rf"trumps?|outranks?|takes?\s+precedence\s+over|taking\s+precedence\s+over|"
    rf"(?:has|have|having|gets?|takes?)\s+(?:priority|precedence)\s+over|"
    rf"prevail\w*\s+over|wins?\s+over|(?:is|are)\s+authoritative\s+over|ranks?\s+above|"
    rf"in\s+place\s+of)\s+"
    rf"(?:(?:all|every|any|each)\s+(?:of\s+)?(?:the\s+|your\s+)?(?:{_EARLIER}\s+|existing\s+)?|"
    rf"(?:the|your)\s+{_EARLIER}\s+|{_EARLIER}\s+){_GOVERNED}\b",
    rf"\b(?:(?:all|any|every)\s+(?:the\s+)?(?:{_EARLIER}\s+)?|(?:the\s+)?{_EARLIER}\s+)"
    rf"{_GOVERNED}\b[^.!?\n]{{0,30}}?\b(?:(?:is|are|be|were)\s+(?:hereby\s+|now\s+|to\s+be\s+)?"
    rf"(?:superseded|overridden|overruled|replaced|void|invalid(?:ated)?|obsolete|revoked|"
    rf"cancell?ed|ignored|disregarded|suspended)|no\s+longer\s+(?:appl(?:y|ies)|valid|"
    rf"in\s+(?:effect|force)|matters?)|(?:do|does)\s+not\s+apply)\b",
    rf"\b(?:ignor\w*|disregard\w*|forget|bypass)\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?"
    rf"(?:the\s+|your\s+)?{_EARLIER}\s+{_EVIDENCE}\b",
    r"\b(?:this|the\s+present)\s+(?:page|document|doc|runbook|policy|notice|source|text|"
    r"file|section)\s+(?:always\s+)?(?:wins|prevails)\b",
    r"\b(?:ersetzt|überschreibt|verdrängt|hat\s+vorrang\s+vor|geht)\s+(?:allen?|jeden?|"
    r"jegliche[nrs]?|sämtliche[n]?)\s+(?:anderen?\s+|vorherigen?\s+|früheren?\s+)?"
    r"(?:dokument\w*|quellen|anweisungen|richtlinien|runbooks?|seiten|belege)\b",
    r"\b(?:remplace|annule|prévaut\s+sur|prevaut\s+sur|prime\s+sur|a\s+priorité\s+sur|"
    r"l'emporte\s+sur)\s+(?:tous|toutes|chacun|chacune|n'importe\s+quel\w*)\s+(?:les\s+)?"
    r"(?:autres\s+)?(?:documents?|sources?|consignes|instructions|politiques|procédures|"
    r"runbooks?|pages)\b",
    r"\b(?:sustituye|reemplaza|substitui|anula|revoga|prevalece\s+sobre|"
    r"(?:tiene|tem)\s+(?:prioridad|prioridade|precedencia|preced[êe]ncia)\s+sobre)\s+"
    r"(?:a\s+)?(?:todos|todas|cualquier|quaisquer|qualquer)\s+(?:los\s+|las\s+|os\s+|as\s+)?"
    r"(?:demás\s+|demais\s+|otros\s+|otras\s+|outros\s+|outras\s+)?(?:documentos?|fuentes|"
    r"fontes|instrucciones|instru[cç][õo]es|políticas|pol[íi]ticas|procedimientos|"
    r"procedimentos|runbooks?|páginas|p[áa]ginas)\b",
    r"\b(?:sostituisce|annulla|sovrascrive|prevale\s+su|ha\s+(?:la\s+)?(?:priorità|precedenza)"
    r"\s+su)\s*(?:tutti|tutte|qualsiasi|ogni)\s+(?:i\s+|le\s+|gli\s+)?(?:altri\s+|altre\s+)?"
    r"(?:documenti|fonti|istruzioni|politiche|procedure|runbook|pagine)\b",
    r"\b(?:отменя\w*|замен\w*|имеет\s+приоритет\s+над|преобладает\s+над|важнее)\s+"
    r"(?:вс\w+|люб\w+|кажд\w+)\s+(?:други\w+\s+|прежни\w+\s+|предыдущи\w+\s+)?"
    r"(?:документ\w*|инструкци\w*|источник\w*|регламент\w*|политик\w*|руководств\w*|"
    r"указани\w*)",
    r"(?:取代|替代|优先于|優先於|凌驾于|凌駕於|覆盖|覆蓋|推翻|高于|高於)(?:所有|全部|一切|任何)"
    r"(?:其他|其它)?的?(?:文档|文檔|文件|资料|資料|来源|來源|证据|證據|指令|指示|说明|說明|规定|"
    r"規定|政策|手册|手冊|运行手册|運行手冊)",
    r"(?:すべて|全て|あらゆる|いかなる)の(?:他の|ほかの)?(?:文書|ドキュメント|資料|指示|手順書|"
    r"ランブック|ポリシー|情報源|証拠)(?:より|に)(?:も)?(?:優先|上書き)",
    r"(?:모든|어떤)\s*(?:다른\s*)?(?:문서|지시|지침|정책|자료|출처)\S*\s*(?:보다|에)?\s*우선",
)
# Written in lower case and matched against lower-cased text, one pattern at a time:
# over SciFact abstracts that is about twice as fast as one IGNORECASE alternation.
_AUTHORITY = tuple(re.compile(p) for p in _CLAIMS_AUTHORITY)
_ADDRESSES_MODEL = (*(re.compile(p) for p in _INSTRUCTS), *_AUTHORITY)
_PARAGRAPH = re.compile(r"\n\s*\n")
# A run of base64 (standard or URL-safe alphabet) long enough to hold a sentence.
_BASE64_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![\w+/=-])")


@functools.lru_cache(maxsize=1024)
def _forms(field: str) -> tuple[str, ...]:
    """The lower-cased texts the patterns read for ``field``: normalised, its skeleton
    when that differs, and both for every base64 run that decodes to text. Cached: one
    answer screens the same fields for its quoted sentences, its support check and each
    source's neighbours."""
    text = normalised(field)
    forms = []
    for reading in (text, *decoded_runs(text)):
        forms.append(reading.lower())
        latin = skeleton(reading)
        if latin != reading:
            forms.append(latin.lower())
    return tuple(forms)


def _matches(patterns: Sequence[re.Pattern[str]], field: str) -> bool:
    return any(p.search(form) is not None for form in _forms(field) for p in patterns)


def addresses_the_model(field: str) -> bool:
    """Whether ``field`` (a paragraph, heading or title) speaks to the answering model (an
    instruction, a forged label or answer, a role or chat-template marker, a claim to
    override the other evidence), in plain text, in disguised letters or in a base64 run
    that decodes to one."""
    return _matches(_ADDRESSES_MODEL, field)


def claims_authority(field: str) -> bool:
    """Whether ``field`` claims the system role or authority over the rest of the
    evidence ("SYSTEM DOCUMENT", ``{"role": "system"}``, "you are now", "supersedes all
    runbooks"): such a claim governs every chunk of its document."""
    return _matches(_AUTHORITY, field)


def decoded_runs(text: str) -> list[str]:
    """The base64 runs of ``text`` that decode to readable UTF-8 text (a hash, a key or
    random bytes decode to something else and are left alone)."""
    decoded = []
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        padded = run + "=" * (-len(run) % 4)
        try:
            raw = (
                base64.urlsafe_b64decode(padded)
                if "-" in run or "_" in run
                else base64.b64decode(padded, validate=True)
            )
            plain = raw.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        printable = sum(c.isprintable() or c.isspace() for c in plain)
        if " " in plain and printable >= 0.95 * len(plain):
            decoded.append(plain)
    return decoded


def frame_addresses_the_model(title: str, heading: str) -> bool:
    """Whether the title or the heading of an evidence item addresses the model."""
    return addresses_the_model(title) or addresses_the_model(heading)


def _paragraphs(text: str) -> list[str]:
    return [p for p in _PARAGRAPH.split(text) if p.strip()]


def _fields(text: str, title: str, heading: str) -> list[str]:
    """Every field of a chunk the model reads, and its text as one run (an instruction
    spread over two paragraphs is matched across the break)."""
    paragraphs = _paragraphs(text)
    joined = [" ".join(paragraphs)] if len(paragraphs) > 1 else []
    return [title, heading, *paragraphs, *joined]


def split_instructions(
    text: str, *, title: str = "", heading: str = "", screened: bool = False
) -> tuple[str, tuple[str, ...]]:
    """``text`` without what addresses the model, and what was taken out.

    An instruction governs the text around it: when the ``title``, the ``heading``, a
    paragraph or the text as a whole addresses the model, or the chunk is ``screened``
    for its neighbours (:func:`screened_sources`), every paragraph is taken out, after
    the title and heading that address the model (first) — nothing is kept.
    """
    paragraphs = _paragraphs(text)
    if not (screened or any(addresses_the_model(f) for f in _fields(text, title, heading))):
        return text, ()
    fields = tuple(f for f in (title, heading) if f and addresses_the_model(f))
    return "", fields + tuple(paragraphs)


def screened_sources(sources: Sequence[SelectedSource]) -> frozenset[str]:
    """The labels of the ``sources`` whose whole text is screened.

    A source is screened when one of its fields addresses the model
    (:func:`split_instructions`), when the source next to it in its document does or the
    text across their boundary does (a split instruction is caught whichever half is
    cited), and when any source of its document claims the system role or authority
    over the rest (:func:`claims_authority`). Sources are next to each other when their
    paragraphs touch or overlap in one section, or one starts the section after the
    other's; without positions, when they share a section.
    """
    by_document: dict[str, list[SelectedSource]] = {}
    for source in sources:
        by_document.setdefault(source.candidate.document_id, []).append(source)
    screened: set[str] = set()
    for group in by_document.values():
        ordered = sorted(group, key=_reading_order)
        fields = {
            s.label: _fields(s.included_text, s.candidate.title, s.candidate.heading)
            for s in ordered
        }
        if any(claims_authority(f) for s in ordered for f in fields[s.label]):
            screened.update(s.label for s in ordered)
            continue
        addressed = {s.label for s in ordered if _any_addresses(fields[s.label])}
        screened |= addressed
        for before, after in itertools.pairwise(ordered):
            if not _adjacent(before, after):
                continue
            if {before.label, after.label} & addressed or addresses_the_model(
                _boundary(before, after)
            ):
                screened.update((before.label, after.label))
    return frozenset(screened)


def _any_addresses(fields: Iterable[str]) -> bool:
    return any(addresses_the_model(f) for f in fields)


def _reading_order(source: SelectedSource) -> tuple[int, str, int, str]:
    positions = source.candidate.positions
    if positions is None or not positions.paragraph_indexes:
        return (-1, source.candidate.section_id, -1, source.candidate.chunk_id)
    first = min(positions.paragraph_indexes)
    return (positions.section_index, source.candidate.section_id, first, source.candidate.chunk_id)


def _adjacent(before: SelectedSource, after: SelectedSource) -> bool:
    a, b = before.candidate.positions, after.candidate.positions
    if a is None or b is None or not a.paragraph_indexes or not b.paragraph_indexes:
        return before.candidate.section_id == after.candidate.section_id
    if a.section_index == b.section_index:
        return min(b.paragraph_indexes) <= max(a.paragraph_indexes) + 1
    return b.section_index == a.section_index + 1 and min(b.paragraph_indexes) == 0


def _boundary(before: SelectedSource, after: SelectedSource) -> str:
    """The last paragraph of ``before`` and the first of ``after``, as one run."""
    tail = _paragraphs(before.included_text.removesuffix(CUT_MARK))
    head = _paragraphs(after.included_text)
    return " ".join(p for p in (tail[-1:] + head[:1]))
