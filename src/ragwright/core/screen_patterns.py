"""The instruction screen's patterns: what a field that speaks to the answering model
looks like, in the languages :mod:`ragwright.core.screen` reads.

Two tables: :data:`INSTRUCTS` (instructions, forged labels and answers, role markers)
and :data:`CLAIMS_AUTHORITY` (claims of the system role or of authority over the rest of
the evidence, which screen their whole document). Every pattern is written in lower case
and matched against normalised, lower-cased text (``screen.normalised``, ``skeleton``).
"""

from __future__ import annotations

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
INSTRUCTS: tuple[str, ...] = (
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
CLAIMS_AUTHORITY: tuple[str, ...] = (
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
