"""The course's `bert.py`: `from bert import BertModel`, as the course's `sanity_check.py` imports it.

    bert = BertModel.from_pretrained('bert-base-uncased')
    outputs = bert(input_ids, attention_mask)
    outputs['last_hidden_state'], outputs['pooler_output']

A thin face over minbert's reference model (minbert/model.py), not a second implementation:
`from_pretrained` loads through `minbert.from_pretrained` (a Hugging Face name, a checkpoint folder
or 'minilm'), in evaluation mode as the course's does, and a call returns the course's dict of
the two tensors instead of minbert's `EncoderOutput`.
"""
import torch

import minbert


class BertModel(torch.nn.Module):
    """The course's BertModel: `forward(input_ids, attention_mask)` -> {'last_hidden_state', 'pooler_output'}."""

    def __init__(self, model: minbert.BertModel):
        super().__init__()
        self.bert = model
        self.config = model.config

    @classmethod
    def from_pretrained(cls, name_or_path: str) -> "BertModel":
        return cls(minbert.from_pretrained(name_or_path, implementation="reference")).eval()

    def forward(self, input_ids, attention_mask) -> dict:
        out = self.bert(input_ids, attention_mask)
        return {"last_hidden_state": out.last_hidden_state, "pooler_output": out.pooler_output}
