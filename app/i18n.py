"""The app's own user-facing text in English and Simplified Chinese."""

from __future__ import annotations

from app.errors import ChatError, Problem

TEXT: dict[str, dict[str, str]] = {
    "en": {
        "greeting": "Hello! I'm {model}, running on your own vLLM server. Ask me anything.",
        "not_ready": "The model server at {server} is not answering yet (waiting for {what}). "
        "If it is not running, start it with `make serve`. "
        "I'll say here when it is ready; you don't need to reload.",
        "ready": "{model} is ready. Ask me anything.",
        "admin_link": "You are an admin here: [the admin page](/admin) (users, usage, limits, defaults).",
        "in_project": "In the project **{name}**: its instructions and documents apply to this chat.",
        "temporary_mode": "History",
        "temporary_off": "Kept chat",
        "temporary_on": "Temporary chat",
        "temporary_notice": "**Temporary chat**: nothing of it is kept, not in your chats, not on the server's disk, "
        "not in your documents; it ends when you leave it.",
        "temporary_keep": "Keep this chat",
        "memory_heading": "About the user (facts they asked you to remember):",
        "remember_offer": "Remember this about you in every chat (not temporary ones)? “{fact}” "
        "You can edit, pause or delete it under [About you](/account).",
        "remember_keep": "Remember",
        "remember_drop": "Don't",
        "remember_kept": "Remembered: “{fact}”. [About you](/account) lists what is remembered.",
        "remember_dropped": "Not remembered.",
        "remember_full": "Not remembered: you keep as many facts as you can. Delete one under [About you](/account).",
        "remember_failed": "Not remembered: the history database does not answer just now. Try again in a moment.",
        "remember_too_long": "That is too long to remember: a fact is at most {limit} characters.",
        "temporary_kept": "This chat is kept now: it is in your chats, with everything said so far.",
        "settings_rejected": "Some settings were not applied (the previous values stay): {problems}",
        "sources": "Sources",
        "source_page": "{document}, p. {page}",
        "source_gone": "This passage is no longer in your documents (the document was deleted).",
        "documents_command": "Your documents: use one in this chat, rename or delete it",
        "documents_title": "Your documents (a file too long to read whole is kept here when you attach it):",
        "documents_need_history": "Documents are kept in the chat history, which is off here (HISTORY=false).",
        "documents_none": "No documents yet: attach a file too long for the window and it is kept here.",
        "documents_use": "Use in this chat",
        "documents_rename": "Rename",
        "documents_delete": "Delete",
        "documents_save": "Save",
        "documents_here": "searched in this chat",
        "document_line": "{pages} pages, {passages} passages",
        "document_indexing": "{name} ({pages} pages) is too long to read whole: splitting it into passages …",
        "document_indexed": "{name} is too long to read whole: its {passages} passages are searched for each "
        "question in this chat, and the answer names the ones it was given. The Documents button lists it.",
        "document_chat_full": "This chat already searches {limit} documents, as many as one chat may.",
        "passages_crowded_out": "Passages of this chat's documents match the question, but none fits beside it and "
        "the answer: it is answered without them. Lower Max tokens in the settings, or ask a shorter question.",
        "document_not_found": "That document is not among yours (any more).",
        "trimmed": "{count} earlier turn(s) left out to fit the {window}-token window",
        "stopped": "stopped",
        "cut_off": "cut off: the app stopped while this answer was written",
        "cached": "{cached} of {prompt} prompt tokens from the server's cache",
        "regenerate": "Regenerate",
        "previous_version": "Previous version",
        "next_version": "Next version",
        "fork": "Continue in a new chat",
        "fork_name": "{name} (continued)",
        "forked": "Continued in a new chat: [open it]({link}). This chat stays as it is.",
        "fork_empty": "Nothing to continue yet: this chat is saved from its first answer on.",
        "fork_needs_history": "Continuing in a new chat needs the chat history, which is off here (HISTORY=false).",
        "user": "User",
        "shared_chat": "Shared chat",
        "shared_about": "A chat shared read-only.",
        "key_title": "This chat belongs to the person at this machine",
        "key_about": "It runs without users, for whoever started it. Open the link that `make chat` or `make run` "
        "printed where it started (`make link` prints it again), or paste its key here.",
        "key_wrong": "That key is not this start's: the chat was restarted since. `make link` prints the new link.",
        "key_field": "Key",
        "key_open": "Open the chat",
        "shared_none": "This link shows nothing: the chat is not shared (any more).",
        "export_markdown": "Export Markdown",
        "export_json": "Export JSON",
        "export_ready": "This chat as {kind}:",
        "export_empty": "Nothing to export yet: this chat is saved from its first answer on.",
        "history_unavailable": "This could not be saved to the history just now (the app's log says why).",
        "unsaved_journaled": "Not saved yet: the history's database is away; kept on this server and saved when it "
        "is back",
        "unsaved_in_memory": "Not saved yet: the disk is full, so this is kept in memory only and lost if the app "
        "stops before the database takes it",
        "unsaved_lost": "Not saved: the server's journal of waiting messages is full (JOURNAL_MAX_MB), so this "
        "message is not kept in the history",
        "unsaved_rejected": "Not saved: the history's database refused this message; it is set aside on the server "
        "for its operator",
        "you": "You",
        "stats": "first token {ttft} · {tokens} tokens · {rate} tok/s",
        "label_temperature": "Temperature",
        "label_top_p": "Top P",
        "label_max_tokens": "Max new tokens",
        "label_repetition_penalty": "Repetition penalty",
        "label_system_prompt": "System prompt",
        "tip_temperature": "0 answers the same way every time; higher is more varied.",
        "tip_top_p": "Sample only from the most likely tokens that add up to this share.",
        "tip_max_tokens": "The longest answer, in tokens. Lowered if the conversation leaves less room.",
        "tip_repetition_penalty": "Above 1 discourages the model from repeating itself.",
        "tip_system_prompt": "Instructions the model sees before the conversation.",
        "preset_balanced": "Balanced",
        "preset_balanced_about": "The model's own recommended settings: for most questions.",
        "preset_precise": "Precise",
        "preset_precise_about": "Little randomness: the same question gets much the same careful answer.",
        "preset_precise_prompt": "You are ERNIE, a careful assistant. Answer accurately and to the point, "
        "and say so when you are not sure.",
        "preset_creative": "Creative",
        "preset_creative_about": "More randomness: varied, inventive answers, for stories and ideas.",
        "preset_creative_prompt": "You are ERNIE, an imaginative assistant. Be inventive and vivid, "
        "and offer unexpected ideas.",
        "preset_translate": "Translate zh↔en",
        "preset_translate_about": "Translates each message: Chinese into English, anything else into Chinese.",
        "preset_translate_prompt": "You are a translator. Translate the user's message: Chinese into English, "
        "any other language into Simplified Chinese. Reply with the translation only.",
        "preset_own_about": "Your own preset.",
        "preset_summary": "temperature {temperature:g} · top-p {top_p:g} · up to {max_tokens} tokens · "
        "repetition penalty {repetition_penalty:g}",
        "preset_saved": "Saved your preset “{name}”. Pick it in the list at the top when you start a chat "
        "(reload the page if it is not there yet).",
        "preset_replaced": "Your preset “{name}” now has these settings.",
        "preset_renamed": "Renamed your preset to “{name}”.",
        "preset_deleted": "Deleted your preset “{name}”.",
        "label_preset_save": "Save these settings as a preset named",
        "tip_preset_save": "Type a name and confirm: new chats can start with these settings "
        "(a preset of yours with that name gets them).",
        "label_preset_pick": "Your presets",
        "label_preset_rename": "Rename it to",
        "label_preset_delete": "Delete it",
        Problem.UNREACHABLE: "The model server at {server} is not reachable. "
        "Start it with `make serve` (or check VLLM_BASE_URL), then send your message again.",
        Problem.TIMEOUT: "The model server at {server} did not answer in time. It may be overloaded; try again.",
        Problem.UNAUTHORIZED: (
            "The model server refused the API key. Make API_KEY in .env match `vllm serve --api-key`."
        ),
        Problem.MODEL_MISSING: "The model server does not serve the expected model ({reason}). "
        "Check MODEL_NAME, or leave it empty to use whatever vLLM serves.",
        Problem.REJECTED: "The model server refused the request: {reason}",
        Problem.SERVER_ERROR: "The model server failed ({status}). Try again; if it keeps failing, check its log.",
        Problem.INTERRUPTED: "The connection to the model server was lost in the middle of the answer. "
        "Your message is kept; send the next one when the server is back.",
        Problem.MESSAGE_TOO_LONG: "Your message is too long: it needs {tokens} tokens with the system prompt, "
        "and this model accepts at most {limit}. Please shorten it.",
        Problem.EMPTY_MESSAGE: "Your message is empty. Type something to ask the model.",
        Problem.BUSY: "Still answering your previous message. Wait for it, or press stop, then send again.",
        Problem.ANSWERS_AT_ONCE: "You already have {limit} answer(s) being written in other tabs. "
        "Send again when one of them has finished (or stop it).",
        Problem.TOO_MANY_MESSAGES: "You sent {limit} messages in the last minute. Try again in {seconds} s.",
        Problem.QUOTA_USED: "You have used today's {limit} tokens. The quota starts again at midnight (UTC), "
        "in {hours} h.",
        Problem.PRESET_NAME: "A preset's name is one line of at most {limit} characters. Type another.",
        Problem.PRESET_BUILT_IN: "That is the name of a built-in preset. Choose another name.",
        Problem.PRESET_NAME_TAKEN: "You already have a preset named “{name}”. Choose another name.",
        Problem.PRESET_MISSING: "You have no preset named “{name}” (any more).",
        Problem.PRESETS_TOO_MANY: "You have as many presets as you can keep. Delete one, or save under the name "
        "of one to replace it.",
        Problem.PRESETS_NEED_HISTORY: "Saving presets needs the chat history and a login, which are off here "
        "(HISTORY=false). The built-in presets work.",
        Problem.TOO_MANY_FILES: "At most {limit} files can be attached to one message. Nothing was sent.",
        Problem.FILE_TYPE: "{name}: this kind of file cannot be attached (allowed: {types}). Nothing was sent.",
        Problem.FILE_TOO_BIG: "{name} is over the {limit} MB limit for an attached file. Nothing was sent.",
        Problem.FILE_NOT_TEXT: "{name} is not text the model can read (a binary file, or not UTF-8). Nothing was sent.",
        Problem.FILE_NOT_PDF: "{name} could not be read as a PDF (damaged or not a PDF). Nothing was sent.",
        Problem.FILE_ENCRYPTED: "{name} is an encrypted PDF; its text cannot be read. Nothing was sent.",
        Problem.FILE_NO_TEXT: "{name} has no text to read (a PDF of images only, e.g. a scan). Nothing was sent.",
        Problem.FILE_TOO_LONG: "{name} is too long for the model's window: it needs {tokens} tokens "
        "and only {room} are left for it. Nothing was sent; attach a shorter file.",
        Problem.FILE_TOO_MANY_PAGES: "{name} has {pages} pages; a file may have {limit}. Nothing was sent; split it "
        "into smaller files.",
        Problem.FILE_TOO_MUCH_TEXT: "{name} holds more than {limit} characters of text, more than a file may. "
        "Nothing was sent; split it into smaller files.",
        Problem.READER_STOPPED: "The process reading the attached files stopped before it was done (the server may "
        "lack the memory for them). Nothing was sent; try again, or with smaller files.",
        Problem.LIBRARY_FULL: "{name} would take your documents past {limit} MB. Nothing was sent; delete "
        "documents you no longer need (the Documents button) and attach it again.",
        Problem.CHAT_DOCUMENTS_FULL: "{name}: this chat already searches {limit} documents, as many as one chat "
        "may. Nothing was sent; start a new chat for it.",
        Problem.IMPORT_FOREIGN: "{name} is not an export this app reads: a ChatGPT export (its ZIP or "
        "conversations.json), an Open WebUI export, or this app's Export JSON. Nothing was imported.",
        Problem.IMPORT_DAMAGED: "{name} is damaged ({part} cannot be read: {reason}). Nothing was imported; export "
        "it again.",
        Problem.IMPORT_TOO_BIG: "{name} unpacks to more than {limit} MB (IMPORT_MAX_MB). Nothing was imported.",
        Problem.IMPORT_EMPTY: "{name} holds no chat. Nothing was imported.",
    },
    "zh": {
        "greeting": "你好！我是 {model}，运行在你自己的 vLLM 服务器上。有什么可以帮你？",
        "not_ready": "模型服务器 {server} 尚未响应（正在等待 {what}）。"
        "如果它没有运行，请用 `make serve` 启动。就绪后我会在这里告诉你，无需刷新页面。",
        "ready": "{model} 已就绪，请开始提问。",
        "admin_link": "你是这里的管理员：[管理页面](/admin)（用户、用量、限制、默认设置）。",
        "in_project": "本对话属于项目 **{name}**：项目的说明和文档适用于此对话。",
        "temporary_mode": "历史记录",
        "temporary_off": "保留对话",
        "temporary_on": "临时对话",
        "temporary_notice": "**临时对话**：不会保留任何内容，不进入你的对话列表，不写入服务器磁盘，"
        "也不进入你的文档；离开即结束。",
        "temporary_keep": "保留此对话",
        "memory_heading": "关于用户（用户请你记住的事实）：",
        "remember_offer": "在每个对话中（临时对话除外）记住关于你的这一点吗？“{fact}” "
        "你可以在[关于你](/account)中编辑、暂停或删除。",
        "remember_keep": "记住",
        "remember_drop": "不用",
        "remember_kept": "已记住：“{fact}”。[关于你](/account)列出了记住的内容。",
        "remember_dropped": "未记住。",
        "remember_full": "未记住：你记住的事实已达上限。请在[关于你](/account)中删除一条。",
        "remember_failed": "未记住：历史数据库暂时没有响应，请稍后再试。",
        "remember_too_long": "内容太长，无法记住：一条事实最多 {limit} 个字符。",
        "temporary_kept": "此对话已保留：它和目前为止的所有内容都在你的对话列表中。",
        "settings_rejected": "部分设置未生效（保留原值）：{problems}",
        "sources": "来源",
        "source_page": "{document}，第 {page} 页",
        "source_gone": "这段内容已不在你的文档中（文档已被删除）。",
        "documents_command": "你的文档：在本对话中使用、重命名或删除",
        "documents_title": "你的文档（附加的文件太长、无法整篇读取时，会保存在这里）：",
        "documents_need_history": "文档保存在聊天历史记录中，而此处已关闭（HISTORY=false）。",
        "documents_none": "还没有文档：附加一个超出上下文窗口的文件，它就会保存在这里。",
        "documents_use": "在本对话中使用",
        "documents_rename": "重命名",
        "documents_delete": "删除",
        "documents_save": "保存",
        "documents_here": "本对话正在检索",
        "document_line": "{pages} 页，{passages} 段",
        "document_indexing": "{name}（{pages} 页）太长，无法整篇读取：正在拆分为段落 …",
        "document_indexed": "{name} 太长，无法整篇读取：本对话的每个问题都会检索它的 {passages} 个段落，"
        "回答下方会列出所用的段落。点击“Documents”按钮可以查看它。",
        "document_chat_full": "这个对话已在检索 {limit} 个文档，已达单个对话的上限。",
        "passages_crowded_out": "本对话的文档中有与问题相关的段落，但没有一段能与问题和回答一起放下："
        "本次回答不使用它们。请在设置中调低 Max tokens，或把问题写短一些。",
        "document_not_found": "这个文档不在你的文档中（或已被删除）。",
        "trimmed": "为适应 {window} 个 token 的上下文窗口，省略了较早的 {count} 轮对话",
        "stopped": "已停止",
        "cut_off": "已中断：应用在生成这条回答时停止了",
        "cached": "提示词 {prompt} 个 token 中 {cached} 个来自服务器缓存",
        "regenerate": "重新生成",
        "previous_version": "上一个版本",
        "next_version": "下一个版本",
        "fork": "在新对话中继续",
        "fork_name": "{name}（续）",
        "forked": "已在新对话中继续：[打开]({link})。本对话保持不变。",
        "fork_empty": "暂无可继续的内容：对话从第一条回答起才会保存。",
        "fork_needs_history": "在新对话中继续需要聊天历史记录，而此处已关闭（HISTORY=false）。",
        "user": "用户",
        "shared_chat": "共享的对话",
        "shared_about": "只读共享的对话。",
        "key_title": "此对话属于这台电脑前的人",
        "key_about": "它没有用户，只为启动它的人运行。请打开 `make chat` 或 `make run` 启动时打印的链接"
        "（`make link` 可再次打印），或在此粘贴其中的密钥。",
        "key_wrong": "这个密钥不属于本次启动：对话已重新启动。`make link` 会打印新的链接。",
        "key_field": "密钥",
        "key_open": "打开对话",
        "shared_none": "此链接没有内容：该对话未共享（或已停止共享）。",
        "export_markdown": "导出 Markdown",
        "export_json": "导出 JSON",
        "export_ready": "本次对话的 {kind} 文件：",
        "export_empty": "暂无可导出的内容：对话从第一条回答起才会保存。",
        "history_unavailable": "这项内容暂时无法保存到历史记录（原因见应用日志）。",
        "unsaved_journaled": "尚未保存：历史数据库暂时不可用；已保留在本服务器上，数据库恢复后即保存",
        "unsaved_in_memory": "尚未保存：磁盘已满，只保留在内存中；若应用在数据库恢复前停止，将会丢失",
        "unsaved_lost": "未保存：服务器的待保存消息日志已满（JOURNAL_MAX_MB），这条消息不会保存到历史记录",
        "unsaved_rejected": "未保存：历史数据库拒绝了这条消息；它已另存于服务器上，供管理员处理",
        "you": "你",
        "stats": "首个 token {ttft} · {tokens} 个 token · {rate} token/秒",
        "label_temperature": "温度",
        "label_top_p": "Top P",
        "label_max_tokens": "最大生成 token 数",
        "label_repetition_penalty": "重复惩罚",
        "label_system_prompt": "系统提示词",
        "tip_temperature": "0 表示每次回答相同；越高越多样。",
        "tip_top_p": "只从累计概率达到该比例的候选 token 中采样。",
        "tip_max_tokens": "回答的最大长度（token）。对话剩余空间不足时会自动降低。",
        "tip_repetition_penalty": "大于 1 可减少模型重复。",
        "tip_system_prompt": "模型在对话之前看到的指令。",
        "preset_balanced": "均衡",
        "preset_balanced_about": "模型推荐的默认设置：适合大多数问题。",
        "preset_precise": "精确",
        "preset_precise_about": "随机性低：同样的问题得到基本相同、严谨的回答。",
        "preset_precise_prompt": "你是 ERNIE，一个严谨的助手。回答要准确、切题；不确定时请直说。",
        "preset_creative": "创意",
        "preset_creative_about": "随机性高：回答多样、新颖，适合故事和点子。",
        "preset_creative_prompt": "你是 ERNIE，一个富有想象力的助手。回答要新颖、生动，可以提出意想不到的想法。",
        "preset_translate": "中英互译",
        "preset_translate_about": "翻译每条消息：中文译成英文，其他语言译成中文。",
        "preset_translate_prompt": "你是一名翻译。翻译用户的消息：中文译成英文，其他语言译成简体中文。只回复译文。",
        "preset_own_about": "你自己的预设。",
        "preset_summary": "温度 {temperature:g} · top-p {top_p:g} · 最多 {max_tokens} 个 token · "
        "重复惩罚 {repetition_penalty:g}",
        "preset_saved": "已保存你的预设“{name}”。开始新对话时可在顶部的列表中选择它（如果还没有出现，请刷新页面）。",
        "preset_replaced": "你的预设“{name}”已更新为这些设置。",
        "preset_renamed": "已将你的预设重命名为“{name}”。",
        "preset_deleted": "已删除你的预设“{name}”。",
        "label_preset_save": "将这些设置保存为预设，名称",
        "tip_preset_save": "输入名称并确认：新对话可以使用这些设置开始（同名的预设会被更新）。",
        "label_preset_pick": "你的预设",
        "label_preset_rename": "重命名为",
        "label_preset_delete": "删除它",
        Problem.UNREACHABLE: (
            "无法连接模型服务器 {server}。请用 `make serve` 启动（或检查 VLLM_BASE_URL），然后重新发送消息。"
        ),
        Problem.TIMEOUT: "模型服务器 {server} 响应超时，可能负载过高，请重试。",
        Problem.UNAUTHORIZED: "模型服务器拒绝了 API 密钥。请让 .env 中的 API_KEY 与 `vllm serve --api-key` 一致。",
        Problem.MODEL_MISSING: (
            "模型服务器没有提供预期的模型（{reason}）。请检查 MODEL_NAME，或留空以使用 vLLM 提供的模型。"
        ),
        Problem.REJECTED: "模型服务器拒绝了请求：{reason}",
        Problem.SERVER_ERROR: "模型服务器出错（{status}）。请重试；如果持续失败，请查看其日志。",
        Problem.INTERRUPTED: "回答过程中与模型服务器的连接中断。你的消息已保留；服务器恢复后请继续发送。",
        Problem.MESSAGE_TOO_LONG: (
            "你的消息太长：连同系统提示词需要 {tokens} 个 token，而该模型最多接受 {limit} 个。请缩短后再试。"
        ),
        Problem.EMPTY_MESSAGE: "消息为空。请输入要问模型的内容。",
        Problem.BUSY: "上一条消息还在回答中。请等待完成，或点击停止后再发送。",
        Problem.ANSWERS_AT_ONCE: "你在其他标签页中已有 {limit} 个回答正在生成。请等其中一个完成（或停止它）后再发送。",
        Problem.TOO_MANY_MESSAGES: "你在过去一分钟内发送了 {limit} 条消息。请在 {seconds} 秒后再试。",
        Problem.QUOTA_USED: "你今天的 {limit} 个 token 已用完。额度将在 UTC 午夜（{hours} 小时后）重置。",
        Problem.PRESET_NAME: "预设名称为一行，最多 {limit} 个字符。请换一个。",
        Problem.PRESET_BUILT_IN: "这是内置预设的名称。请换一个名称。",
        Problem.PRESET_NAME_TAKEN: "你已有名为“{name}”的预设。请换一个名称。",
        Problem.PRESET_MISSING: "你没有（或已不再有）名为“{name}”的预设。",
        Problem.PRESETS_TOO_MANY: "你的预设已达上限。请删除一个，或以已有预设的名称保存来替换它。",
        Problem.PRESETS_NEED_HISTORY: (
            "保存预设需要聊天历史记录和登录，而此处已关闭（HISTORY=false）。内置预设仍可使用。"
        ),
        Problem.TOO_MANY_FILES: "一条消息最多可附加 {limit} 个文件。未发送任何内容。",
        Problem.FILE_TYPE: "{name}：不能附加这种文件（允许：{types}）。未发送任何内容。",
        Problem.FILE_TOO_BIG: "{name} 超过了附件 {limit} MB 的大小上限。未发送任何内容。",
        Problem.FILE_NOT_TEXT: "{name} 不是模型能读取的文本（二进制文件，或不是 UTF-8 编码）。未发送任何内容。",
        Problem.FILE_NOT_PDF: "{name} 无法作为 PDF 读取（已损坏或不是 PDF）。未发送任何内容。",
        Problem.FILE_ENCRYPTED: "{name} 是加密的 PDF，无法读取其文本。未发送任何内容。",
        Problem.FILE_NO_TEXT: "{name} 中没有可读取的文本（只有图像的 PDF，例如扫描件）。未发送任何内容。",
        Problem.FILE_TOO_LONG: (
            "{name} 对模型的上下文窗口来说太长：它需要 {tokens} 个 token，而只剩 {room} 个。"
            "未发送任何内容；请附加更短的文件。"
        ),
        Problem.FILE_TOO_MANY_PAGES: (
            "{name} 有 {pages} 页，单个文件最多 {limit} 页。未发送任何内容；请拆分成较小的文件。"
        ),
        Problem.FILE_TOO_MUCH_TEXT: (
            "{name} 的文本超过 {limit} 个字符，超出单个文件的上限。未发送任何内容；请拆分成较小的文件。"
        ),
        Problem.READER_STOPPED: (
            "读取附件的进程在完成前停止了（服务器的内存可能不足）。未发送任何内容；请重试，或改用较小的文件。"
        ),
        Problem.LIBRARY_FULL: (
            "{name} 会使你的文档超过 {limit} MB。未发送任何内容；请删除不再需要的文档（“Documents”按钮）后再附加。"
        ),
        Problem.CHAT_DOCUMENTS_FULL: (
            "{name}：这个对话已在检索 {limit} 个文档，已达单个对话的上限。未发送任何内容；请为它开始新的对话。"
        ),
        Problem.IMPORT_FOREIGN: (
            "{name} 不是本应用能读取的导出文件：应为 ChatGPT 的导出（ZIP 或 conversations.json）、Open WebUI 的导出，"
            "或本应用的“Export JSON”。未导入任何内容。"
        ),
        Problem.IMPORT_DAMAGED: "{name} 已损坏（无法读取 {part}：{reason}）。未导入任何内容；请重新导出。",
        Problem.IMPORT_TOO_BIG: "{name} 解压后超过 {limit} MB（IMPORT_MAX_MB）。未导入任何内容。",
        Problem.IMPORT_EMPTY: "{name} 中没有对话。未导入任何内容。",
    },
}


# (label, prompt, lucide icon) of the example prompts under the greeting.
STARTERS: dict[str, list[tuple[str, str, str]]] = {
    "en": [
        ("Explain simply", "Explain in three short sentences how a language model writes an answer.", "lightbulb"),
        ("Write a poem", "Write a four-line poem about the sea at night.", "pen-line"),
        ("Python help", "Write a Python function that checks whether a word is a palindrome.", "code"),
    ],
    "zh": [
        ("通俗解释", "用三句话解释语言模型是如何写出回答的。", "lightbulb"),
        ("写一首诗", "写一首关于夜晚大海的四行短诗。", "pen-line"),
        ("Python 帮助", "写一个判断单词是否为回文的 Python 函数。", "code"),
    ],
}


# What error_text fills in when a ChatError leaves them out.
ERROR_BLANKS: dict[str, object] = {"server": "", "reason": "", "status": ""}


def language_of(locale: str | None) -> str:
    """'zh' for any Chinese locale, else 'en'."""
    return "zh" if (locale or "").lower().startswith("zh") else "en"


def text(lang: str, key: str | Problem, **values: object) -> str:
    """The text for key in lang, filled with values."""
    template = TEXT.get(lang, TEXT["en"]).get(key) or TEXT["en"][key]
    return template.format(**values)


def error_text(lang: str, error: ChatError) -> str:
    """A ChatError as a sentence in lang."""
    values = {**ERROR_BLANKS, **error.details}
    return text(lang, error.problem, **values)
