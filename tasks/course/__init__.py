"""The course's own formats: prediction files byte for byte as its starter code writes them, the
course-level predictions/ folder and the submission zip, and the starter repository's data files."""
