"""The reference workflow's sample: the Amazon rainforest paragraph and its questions.

Paragraph text from the Wikipedia article "Amazon rainforest" (CC BY-SA 3.0), as used by the SQuAD v1.1
dev set and the Hugging Face / SageMaker question-answering samples.
"""

from __future__ import annotations

RAINFOREST_CONTEXT = (
    "The Amazon rainforest (Portuguese: Floresta Amazônica or Amazônia; Spanish: Selva Amazónica, Amazonía or "
    "usually Amazonia; French: Forêt amazonienne; Dutch: Amazoneregenwoud), also known in English as Amazonia or "
    "the Amazon Jungle, is a moist broadleaf forest that covers most of the Amazon basin of South America. This "
    "basin encompasses 7,000,000 square kilometres (2,700,000 sq mi), of which 5,500,000 square kilometres "
    "(2,100,000 sq mi) are covered by the rainforest. This region includes territory belonging to nine nations. "
    "The majority of the forest is contained within Brazil, with 60% of the rainforest, followed by Peru with 13%, "
    "Colombia with 10%, and with minor amounts in Venezuela, Ecuador, Bolivia, Guyana, Suriname and French Guiana. "
    'States or departments in four nations contain "Amazonas" in their names. The Amazon represents over half of '
    "the planet's remaining rainforests, and comprises the largest and most biodiverse tract of tropical rainforest "
    "in the world, with an estimated 390 billion individual trees divided into 16,000 species."
)

RAINFOREST_QUESTIONS = (
    "Which name is also used to describe the Amazon rainforest in English?",
    "How many square kilometers of rainforest is covered in the basin?",
    "How many nations control this region in total?",
    'How many nations contain "Amazonas" in their names?',
    "What are the three countries with the most rainforest?",
    "What percentage of the rainforest does Brazil have?",
    "What does the Amazon represent of the planet's remaining rainforests?",
    "How many species of trees are in the Amazon?",
)

# Gold answers (SQuAD style: any of them counts) for the questions above, in order.
RAINFOREST_ANSWERS = (
    ("Amazonia or the Amazon Jungle", "Amazonia"),
    ("5,500,000",),
    ("nine",),
    ("four",),
    ("Brazil, with 60% of the rainforest, followed by Peru with 13%, Colombia", "Brazil", "Brazil, Peru, Colombia"),
    ("60%",),
    ("over half",),
    ("16,000",),
)
